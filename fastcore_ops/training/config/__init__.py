"""A training run's configuration: typed dataclasses, overridable field by field from the command line.

Recipes are instances of :class:`TrainConfig` (see ``fastcore_ops/training/recipes/``); nothing else decides
how a run trains. Each option is declared once: the ``methods`` section has one field per
registered method (:mod:`fastcore_ops.training.methods.registry`), holding that method's options dataclass,
or None when the method is off. The effective configuration is saved with the run
(``config.json``) and hashed to name it.

``--set section.field=value`` overrides any field with a Python literal of its type (a str
field takes the text as it is), lists and dicts included. ``--set methods.randaugment={}``
turns a method on with its defaults (or give a dict of some of its options),
``--set methods.randaugment.depth=2`` sets one option of a method that is on, and
``--set methods.randaugment=None`` turns it off.

    >>> config = override(TrainConfig(), ["optimizer.lr=0.4", "methods.randaugment={}", "methods.randaugment.depth=2",
    ...                                   "methods.stochastic_depth={'drop_rate': 0.1}"])
    >>> config.optimizer.lr, config.methods.randaugment
    (0.4, RandAugmentOptions(depth=2, severity=9.0))
    >>> config.methods.stochastic_depth
    StochasticDepthOptions(drop_rate=0.1, mode='block')
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from pathlib import Path

from fastcore_ops.data.shards import parse_json
from fastcore_ops.training.config.fields import assign, assign_value, differences, from_fields
from fastcore_ops.training.config.schema import (OPTIMIZERS, PRECISIONS, TOKENIZERS, DataConfig, MethodsConfig,
                                                 ModelConfig, OptimizerConfig, ScheduleConfig, TextConfig, TrainConfig)
from fastcore_ops.training.config.validation import validate, validated
from fastcore_ops.training.methods.registry import methods_of, registered

__all__ = ["OPTIMIZERS", "PRECISIONS", "TOKENIZERS", "DataConfig", "MethodsConfig", "ModelConfig", "OptimizerConfig",
           "ScheduleConfig", "TextConfig", "TrainConfig", "config_hash", "differences", "from_dict", "load_config",
           "override", "setup_hash", "to_dict", "validate", "with_changes"]


def override(config: TrainConfig, assignments: list[str],
             lineage: list[tuple[str, dict[str, object]]] = ()) -> TrainConfig:
    """A validated copy of ``config`` with each ``"section.field=value"`` (or top-level ``"field=value"``) applied.

    ``value`` is a Python literal of the field's type (a str field takes the text as it is);
    ``"section.group.field=value"`` sets one field of an option group that is on. Any fault
    raises ValueError naming the assignment: what is wrong is the text given. lineage: recipes' changes
    applied first, ``(recipe, {"section.field": value})`` as
    :func:`~fastcore_ops.training.recipes.recipe_lineage` lists them, so that a recipe and a command line's
    assignments make one configuration, validated once.

        >>> override(TrainConfig(), ["methods.colout.p_row=0.1"])
        Traceback (most recent call last):
        ...
        ValueError: --set methods.colout.p_row=0.1: methods.colout is off (None); turn it on first: --set methods.colout={} ...
        >>> config = override(TrainConfig(), ["optimizer.lr=0.4"], [("fast", {"optimizer.lr": 0.8, "seed": 3})])
        >>> config.optimizer.lr, config.seed
        (0.4, 3)
    """
    config = dataclasses.replace(config)  # a copy, even with no assignments
    for recipe, changes in lineage:
        try:
            config = _changed(config, changes)
        except ValueError as error:
            raise ValueError(f"recipe {recipe}: {error}") from None
    for assignment in assignments:
        path, sep, text = assignment.partition("=")
        if not sep:
            raise ValueError(f"--set expects section.field=value, got {assignment!r}")
        path, text = path.strip(), text.strip()
        try:
            config = assign(config, path.split("."), text, "")
        except (TypeError, ValueError) as error:
            raise ValueError(f"--set {path}={text}: {error}") from None
    return validated(config)


def with_changes(config: TrainConfig, changes: dict[str, object]) -> TrainConfig:
    """A validated copy of ``config`` with each dotted field of ``changes`` set to its Python value (a recipe's
    changes to its parent), checked against the field's type as ``--set``'s text is; ValueError names the field.

        >>> with_changes(TrainConfig(), {"optimizer.lr": 1, "methods.mixup": {"alpha": 0.2}}).optimizer.lr
        1.0
    """
    return validated(_changed(dataclasses.replace(config), changes))


def _changed(config: TrainConfig, changes: dict[str, object]) -> TrainConfig:
    """``config`` with each dotted field of ``changes`` set to its Python value, not yet validated."""
    for path, value in changes.items():
        try:
            config = assign_value(config, path.split("."), value, "")
        except (TypeError, ValueError) as error:
            raise ValueError(f"{path}: {error}") from None
    return config


def to_dict(config: TrainConfig) -> dict:
    """``config`` as nested dicts, ready for JSON (which writes its tuples as lists)."""
    return dataclasses.asdict(config)


def from_dict(values: dict) -> TrainConfig:
    """The config saved by :func:`to_dict` (a run's ``config.json``), validated; unknown fields are refused.

    >>> from_dict(to_dict(TrainConfig())) == TrainConfig()
    True
    """
    if not isinstance(values, dict):
        raise ValueError(f"a configuration must be an object of sections, got {type(values).__name__}")
    if isinstance(values.get("model"), dict) and "surgeries" in values["model"]:
        raise ValueError("it was written before methods had a registry (its surgeries are model.surgeries, not "
                         "methods), and this version cannot train it as it was: start the run again in a new folder")
    config = from_fields("", TrainConfig, values)
    validate(config)
    return config


def load_config(path: Path) -> TrainConfig:
    """The configuration saved in ``path`` (JSON), or a ValueError naming the file and what is wrong.

    >>> load_config(Path("no/such/config.json"))
    Traceback (most recent call last):
    ...
    ValueError: cannot read the configuration no/such/config.json: No such file or directory
    """
    try:
        values = parse_json(path.read_text())
    except OSError as error:
        raise ValueError(f"cannot read the configuration {path}: {error.strerror or error}") from None
    except ValueError as error:  # not JSON, not UTF-8, NaN, a key twice, or nested past the recursion limit
        raise ValueError(f"the configuration {path} is not valid JSON: {error}") from None
    try:
        return from_dict(values)
    except (TypeError, ValueError) as error:
        raise ValueError(f"the configuration {path} is not usable: {error}") from None


# The methods registered when run folders, results and step costs began to store hashes: their
# hashes hold these methods even when off. A method registered since counts only when it is on, so
# registering one changes no hash that was ever stored.
_HASHED_WHEN_OFF = frozenset({
    "alibi", "augmix", "bce_loss", "blurpool", "channels_last", "colout", "cutmix", "cutout", "ema",
    "ghost_batchnorm", "label_smoothing", "layer_freezing", "low_precision_norm", "mixup", "padded_crop",
    "patch_whitening", "progressive_resize", "randaugment", "sam", "selective_backprop", "seq_length_warmup",
    "squeeze_excite", "stochastic_depth", "swa", "tta"})


# The fields added since hashes were stored: each counts only away from its default, so adding one changes no
# hash that was ever stored.
_HASHED_AWAY_FROM_DEFAULT = ("methods.patch_whitening.eigenvalue_floor", "schedule.warmup_start_fraction",
                             "schedule.lr_decay", "methods.tta.shifts", "methods.tta.fill",
                             "methods.tta.shifted_weight", "methods.tta.average")


@functools.cache  # every hash asks
def _json_default(path: str) -> object:
    """The default of the field at dotted ``path`` (``section.field`` or ``methods.<name>.<option>``), as JSON."""
    section, *rest = path.split(".")
    if section == "methods":
        name, option = rest
        return to_dict(TrainConfig(methods=MethodsConfig(**{name: registered(name).options()})))["methods"][name][option]
    return to_dict(TrainConfig())[section][rest[0]]


def config_hash(config: TrainConfig) -> str:
    """12 hex digits that change with any field (the run's name does not count).

        >>> from fastcore_ops.training.recipes import get_recipe
        >>> config_hash(get_recipe("cifar_baseline")) == config_hash(override(get_recipe("cifar_baseline"), ["seed=0"]))
        True
    """
    values = to_dict(config)
    values.pop("name")
    values["methods"] = {name: options for name, options in values["methods"].items()
                         if options is not None or name in _HASHED_WHEN_OFF}
    for path in _HASHED_AWAY_FROM_DEFAULT:
        *sections, name = path.split(".")
        holder = functools.reduce(lambda section, key: section.get(key) or {}, sections, values)
        if name in holder and holder[name] == _json_default(path):
            del holder[name]
    return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()[:12]


def setup_hash(config: TrainConfig) -> str:
    """The hash of what ``config`` trains: less its seed and budget, one value along a whole tradeoff curve.

    Evaluation methods (test-time augmentation) are left out too: they change what a run reports
    beside its metric, not what it trains or what its steps cost.

        >>> from fastcore_ops.training.recipes import get_recipe
        >>> mild = get_recipe("cifar_mild")
        >>> changes = ["seed=3", "schedule.scale_schedule_ratio=2", "methods.tta={}"]
        >>> setup_hash(mild) == setup_hash(override(mild, changes)) != config_hash(override(mild, changes))
        True
    """
    evaluation_off = {method.name: None for method in methods_of("evaluation")}
    return config_hash(dataclasses.replace(
        config, seed=0, schedule=dataclasses.replace(config.schedule, scale_schedule_ratio=1.0),
        methods=dataclasses.replace(config.methods, **evaluation_off)))
