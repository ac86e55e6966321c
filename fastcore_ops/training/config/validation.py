"""Whether a configuration can train: each field's type and range, and what the methods declare."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Iterator

from fastcore_ops.checks import check_bool, check_choice, check_int, check_interval, check_number, check_str
from fastcore_ops.data.loader import BACKENDS
from fastcore_ops.training.config.schema import OPTIMIZERS, PRECISIONS, TOKENIZERS, ModelConfig, TrainConfig
from fastcore_ops.training.methods.registry import check_methods
from fastcore_ops.training.schedule import DECAYS
from fastcore_ops.training.tasks.registry import task_named


def validate(config: TrainConfig) -> None:
    """Raise TypeError (wrong type) or ValueError (wrong value) naming the first field that cannot work.

    >>> from fastcore_ops.surgery.stochastic_depth import StochasticDepthOptions
    >>> from fastcore_ops.training.config import MethodsConfig
    >>> validate(TrainConfig(methods=MethodsConfig(stochastic_depth=StochasticDepthOptions(drop_rate=1.5))))
    Traceback (most recent call last):
    ...
    ValueError: methods.stochastic_depth: drop_rate must be a number in [0, 1), ...
    """
    _check_finite(config)
    for label, value, check, bounds in _field_checks(config):
        check(label, value, **bounds)
    _check_relations(config)
    _check_model_options(config.model)
    task = task_named(config.task)
    task.check_model(config.model)
    check_methods(config.methods, task, config)


def validated(config: TrainConfig) -> TrainConfig:
    """``config``, once :func:`validate` passed; a ValueError otherwise, a wrong type included: a value of the wrong
    type inside a list or dict (``model.options``) is a bad value too.

    >>> validated(TrainConfig(seed="0"))
    Traceback (most recent call last):
    ...
    ValueError: seed must be an int >= 0, got str '0'
    """
    try:
        validate(config)
    except TypeError as error:
        raise ValueError(str(error)) from None
    return config


def _non_finite(value, path: str) -> Iterator[tuple[str, float]]:
    """(dotted path, value) of each inf or NaN float in ``value``, walking dataclass fields and tuple items.

    Those hold every float field of the configuration; ``model.options`` (a dict) must hold JSON
    values, which have no inf or NaN (:func:`_check_model_options`).
    """
    if isinstance(value, float) and not math.isfinite(value):
        yield path, value
    elif dataclasses.is_dataclass(value):
        for field in dataclasses.fields(value):
            yield from _non_finite(getattr(value, field.name), f"{path}.{field.name}" if path else field.name)
    elif isinstance(value, tuple):
        for index, item in enumerate(value):
            yield from _non_finite(item, f"{path}[{index}]")


def _check_finite(config: TrainConfig) -> None:
    """Refuse inf and NaN in any float field, method options included, however the value arrived.

    One walk over every field, so that none can miss it: a range check lets inf through where it
    has no upper bound (a learning rate of inf trained NaN weights and exited 0), and NaN through
    where it has no bound at all; and ``--set optimizer.lr=1e999`` parses as inf.
    """
    found = next(_non_finite(config, ""), None)
    if found is not None:
        path, value = found
        overflow = " (a number past 1.8e308, such as 1e999, is inf)" if math.isinf(value) else ""
        raise ValueError(f"{path} must be a finite number, got {value!r}{overflow}; give a finite value")


def _check_model_options(model: ModelConfig) -> None:
    if not isinstance(model.options, dict):
        raise TypeError(f"model.options must be a dict of the model builder's options, got "
                        f"{type(model.options).__name__} {model.options!r}")
    try:  # allow_nan=False: JSON has no inf or NaN, so a resumed run could not read them back
        restored = json.loads(json.dumps(model.options, allow_nan=False)) == model.options
    except (TypeError, ValueError, RecursionError):
        restored = False
    if not restored:
        raise ValueError(f"model.options must hold JSON values (str keys; numbers, strings, booleans, None, lists "
                         f"and dicts of them) so that config.json restores them, got {model.options!r}")


# Each section's fields with the check that accepts them and its bounds, in the order they are checked;
# the fields whose bounds depend on others follow in _field_checks, and the relations in _check_relations.
_FIELD_CHECKS = {
    "optimizer": (
        ("name", check_choice, {"choices": OPTIMIZERS}),
        ("lr", check_number, {"low": 0, "low_open": True}),
        ("reference_batch", check_int, {"low": 1}),
        ("momentum", check_number, {"low": 0, "high": 1, "high_open": True}),
        ("eps", check_number, {"low": 0, "low_open": True}),
        ("weight_decay", check_number, {"low": 0}),
        ("nesterov", check_bool, {}),
        ("decoupled_weight_decay", check_bool, {}),
        ("no_decay_norm_and_bias", check_bool, {}),
        ("no_decay_embeddings", check_bool, {}),
        ("grad_clip_norm", check_number, {"low": 0}),
        ("trust_coefficient", check_number, {"low": 0, "low_open": True}),
    ),
    "schedule": (
        ("epochs", check_number, {"low": 0, "low_open": True}),
        ("warmup_epochs", check_number, {"low": 0}),
        ("final_lr_fraction", check_number, {"low": 0, "high": 1}),
        ("warmup_start_fraction", check_number, {"low": 0, "high": 1}),
        ("lr_decay", check_choice, {"choices": DECAYS}),
        ("scale_schedule_ratio", check_number, {"low": 0, "low_open": True}),
    ),
    "data": (
        ("batch_size", check_int, {"low": 1}),
        ("train_size", check_int, {"low": 1}),
        ("eval_size", check_int, {"low": 1}),
        ("crop_scale", check_interval, {"high": 1.0}),
        ("backend", check_choice, {"choices": BACKENDS}),
        ("num_workers", check_int, {"low": -1}),
        ("flip", check_bool, {}),
    ),
    "text": (
        ("tokenizer", check_choice, {"choices": TOKENIZERS}),
        ("vocab_size", check_int, {"low": 257}),  # the 256 byte tokens and at least one merge
        ("sequence_length", check_int, {"low": 1}),
        ("validation_every", check_int, {"low": 2}),  # 1 would leave no training file
    ),
}
_MEANINGS = {"optimizer.grad_clip_norm": "0 = off", "data.num_workers": "-1 = chosen for the device"}


def _field_checks(config: TrainConfig) -> Iterator[tuple[str, object, Callable, dict]]:
    """(label, value, check, its bounds) of each field, in the order they are checked: the run's own fields,
    :data:`_FIELD_CHECKS`, then the fields whose bounds another field sets; lazily, so that a bound is read
    only after its own field passed."""
    yield "name", config.name, check_str, {}
    yield "precision", config.precision, check_choice, {"choices": PRECISIONS}
    yield "compile", config.compile, check_bool, {}
    yield "seed", config.seed, check_int, {"low": 0}
    yield "model.name", config.model.name, check_str, {}
    for section, fields in _FIELD_CHECKS.items():
        for field, check, bounds in fields:
            path = f"{section}.{field}"
            meaning = _MEANINGS.get(path)
            yield f"{path} ({meaning})" if meaning else path, getattr(getattr(config, section), field), check, bounds
    optimizer, data, text = config.optimizer, config.data, config.text
    if not (isinstance(optimizer.betas, tuple) and len(optimizer.betas) == 2):
        raise TypeError(f"optimizer.betas must be a (beta1, beta2) pair, got {optimizer.betas!r}")
    for index, beta in enumerate(optimizer.betas):
        yield f"optimizer.betas[{index}]", beta, check_number, {"low": 0, "high": 1, "high_open": True}
    yield "data.eval_resize", data.eval_resize, check_int, {"low": data.eval_size}
    multiples = text.eval_length_multiples
    if not (isinstance(multiples, tuple) and multiples):
        raise TypeError(f"text.eval_length_multiples must be a non-empty tuple of ints, got {multiples!r}")
    for index, multiple in enumerate(multiples):
        yield f"text.eval_length_multiples[{index}]", multiple, check_int, {"low": 1}
    longest = text.sequence_length * multiples[-1]
    yield (f"text.eval_batch_tokens (at least one sequence of the longest evaluation length, {longest})",
           text.eval_batch_tokens, check_int, {"low": longest})


def _check_relations(config: TrainConfig) -> None:
    """What one field's value allows of another's (each field alone passed :func:`_field_checks`)."""
    optimizer, schedule, text = config.optimizer, config.schedule, config.text
    if optimizer.nesterov and optimizer.name in ("adamw", "lamb"):
        raise ValueError(f"optimizer.nesterov must be False with optimizer.name={optimizer.name!r} (Nesterov "
                         f"momentum is SGD's and LARS's; its momentum is betas[0]), got True")
    if optimizer.decoupled_weight_decay and optimizer.name in ("lamb", "lars"):
        raise ValueError(f"optimizer.decoupled_weight_decay must be False with optimizer.name={optimizer.name!r}: "
                         f"it adds the decay to the update before the trust ratio, as its paper does")
    if optimizer.nesterov and optimizer.momentum == 0:
        raise ValueError("optimizer.nesterov must be False when optimizer.momentum is 0 (Nesterov needs "
                         "momentum), got True")
    if schedule.warmup_epochs > schedule.epochs:
        raise ValueError(f"schedule.warmup_epochs must be in [0, schedule.epochs={schedule.epochs}], "
                         f"got {schedule.warmup_epochs!r}")
    multiples = text.eval_length_multiples
    if list(multiples) != sorted(set(multiples)):
        raise ValueError(f"text.eval_length_multiples must increase, each multiple once, got {multiples!r}")
