"""A training run's configuration: typed dataclasses, overridable field by field from the command line.

Recipes are instances of :class:`TrainConfig` (see ``training/recipes/``); nothing else decides
how a run trains. Each option is declared once: the ``methods`` section has one field per
registered method (:mod:`training.methods.registry`), holding that method's options dataclass,
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

import ast
import copy
import dataclasses
import functools
import hashlib
import json
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path

from fastcore_ops.checks import check_bool, check_choice, check_int, check_interval, check_number, check_str
from fastcore_ops.data.loader import BACKENDS
from training.methods.registry import active, all_methods
from training.models import is_known_model
from training.models.registry import TASKS, names

PRECISIONS = ("fp32", "amp", "amp_bf16", "amp_fp16")
OPTIMIZERS = ("sgd", "adamw", "lamb", "lars")
TOKENIZERS = ("bytes", "bpe")


@dataclass
class ModelConfig:
    """The model and its builder's options; the surgeries that rewrite it are methods (``methods.blurpool``, ...)."""

    # image_classification: a torchvision classifier ("resnet50", ...) or one of training.models
    # ("cifar_resnet20", ...); language_model: a registered language model (training.models).
    name: str = "resnet50"
    # Keyword options of the model's builder: GPTConfig's fields for "gpt", GPT2Config's for
    # "hf_gpt2"; the image classifiers take none. JSON values, so that config.json restores them.
    options: dict[str, object] = field(default_factory=dict)


@dataclass
class OptimizerConfig:
    """SGD with momentum (SGDW with ``decoupled_weight_decay``), AdamW, LAMB or LARS.

    AdamW (``torch.optim.AdamW``) always decouples its weight decay, so ``decoupled_weight_decay``
    does not apply to it, nor do ``momentum`` and ``nesterov`` (its momentum is ``betas[0]``).
    Its decay shrinks the weights by ``lr x weight_decay`` each step, which wants a
    ``weight_decay`` around 0.1 where SGD's coupled decay wants 5e-4. LAMB takes ``betas`` and
    ``eps`` as AdamW does, LARS ``momentum``, ``nesterov`` and ``trust_coefficient`` as SGD does;
    both add their decay to the update before the trust ratio, as their papers define it.
    """

    name: str = "sgd"  # "sgd", "adamw", "lamb" or "lars"
    # Peak learning rate (reached at the end of warmup) for a global batch of reference_batch
    # images; the run scales it linearly to its own global batch, data.batch_size x processes.
    # A --set optimizer.lr=X override is scaled too: X is the LR at reference_batch.
    lr: float = 0.1
    reference_batch: int = 256  # the global batch that lr was written for
    momentum: float = 0.9  # SGD and LARS
    nesterov: bool = False  # SGD and LARS
    trust_coefficient: float = 0.001  # LARS only: the layer's LR is lr x this x |w| / (|g| + decay x |w|)
    betas: tuple[float, float] = (0.9, 0.95)  # AdamW and LAMB; 0.95 (not torch's 0.999) as GPT pretraining uses
    eps: float = 1e-8  # AdamW and LAMB
    weight_decay: float = 5e-4
    # SGDW: decay applied to the weights directly, scaled by lr / peak lr, not added to the gradient.
    decoupled_weight_decay: bool = False
    no_decay_norm_and_bias: bool = False  # no weight decay on normalization weights and on biases
    # No weight decay on nn.Embedding weights, and so on an output layer that shares one (a tied GPT head).
    no_decay_embeddings: bool = False
    grad_clip_norm: float = 0.0  # the trainer clips the gradients' global L2 norm to this; 0 = off


@dataclass
class ScheduleConfig:
    """Length of training and the learning-rate schedule: linear warmup, then cosine decay."""

    epochs: float = 90.0  # may be fractional; the run stops at the step that ends it
    warmup_epochs: float = 0.0
    final_lr_fraction: float = 0.0  # the cosine ends at peak lr times this
    # Scale schedule: multiplies the run's length and every schedule in it (warmup, progressive
    # resizing, freezing, SWA are fractions of the run or scaled here) to vary the budget.
    scale_schedule_ratio: float = 1.0


@dataclass
class DataConfig:
    batch_size: int = 256  # per process; with torchrun the global batch is this times the world size
    train_size: int = 176
    eval_size: int = 224
    eval_resize: int = 232  # evaluation resizes the shorter side to this, then center-crops eval_size
    crop_scale: tuple[float, float] = (0.08, 1.0)  # area range of the random-resized crop
    backend: str = "auto"  # "pil", "dali", or "auto": DALI on a CUDA device where it runs, else pil
    num_workers: int = -1  # decoding workers; -1 = one per core
    flip: bool = True


def _methods_section() -> type:
    """The ``methods`` section: one field per registered method, its options dataclass or None (off)."""
    section = dataclasses.make_dataclass(
        "MethodsConfig", [(method.name, method.options | None, field(default=None)) for method in all_methods()])
    section.__module__ = __name__
    section.__doc__ = ("Each registered method's options, or None when it is off (training.methods.registry). "
                       "Stages run in order: surgeries, model, loader, loss, step, evaluation.")
    return section


MethodsConfig = _methods_section()


@dataclass
class TextConfig:
    """The language_model task's text and its evaluation; the image task ignores this section."""

    tokenizer: str = "bytes"  # "bytes" (256 token ids) or "bpe" (trained on the training files)
    vocab_size: int = 4096  # BPE only: the 256 byte tokens and the merges learned on top
    sequence_length: int = 256  # L, the length trained at (the full length after any warmup)
    validation_every: int = 10  # every k-th file (in path order) is validation text, never trained on
    # Evaluate at these multiples of L (L, 2L, 4L: length extrapolation), where the model can run them.
    eval_length_multiples: tuple[int, ...] = (1, 2, 4)
    eval_batch_tokens: int = 65536  # tokens per evaluation batch, at every length


@dataclass
class TrainConfig:
    name: str = "custom"
    # "image_classification": an ImageFolder tree, model.name a classifier; "language_model": the
    # text section's corpus, model.name a registered language model.
    task: str = "image_classification"
    model: ModelConfig = field(default_factory=ModelConfig)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    data: DataConfig = field(default_factory=DataConfig)
    methods: MethodsConfig = field(default_factory=MethodsConfig)
    text: TextConfig = field(default_factory=TextConfig)
    # "amp": fp16 with a grad scaler on CUDA, bf16 autocast on a CPU with bf16 units, fp32 on other
    # CPUs (which only emulate bf16, slower than fp32); or name one; "fp32" = off.
    precision: str = "amp"
    # torch.compile (inductor) the training forward and backward passes; the custom ops trace through
    # their fake implementations. Each new input shape compiles again (progressive resizing: once per
    # size), and that time is reported apart as compile_seconds, out of the training time.
    compile: bool = False
    seed: int = 0

    def __post_init__(self):
        # Built in Python, from JSON or by --set, equal settings end as equal values (see _canonical).
        for name, kind in _field_types(TrainConfig).items():
            setattr(self, name, _canonical(name, getattr(self, name), kind))


# ----------------------------------------------------------------------------------------
# Field types: one canonical form, and --set's parsing
# ----------------------------------------------------------------------------------------


@functools.cache
def _field_types(cls) -> dict[str, object]:
    return typing.get_type_hints(cls)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _optional_of(kind) -> object | None:
    """``X`` for a field typed ``X | None``, else None."""
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        args = [arg for arg in typing.get_args(kind) if arg is not type(None)]
        if len(args) == 1:
            return args[0]
    return None


def _is_section(kind) -> bool:
    """Whether a field of type ``kind`` is a section, which --set and JSON address field by field."""
    return dataclasses.is_dataclass(kind)


def _tuple_items(kind, length: int) -> tuple | None:
    """The item types of a ``tuple[...]`` type for ``length`` items, or None when it cannot have that many."""
    args = typing.get_args(kind)
    if len(args) == 2 and args[1] is Ellipsis:
        return (args[0],) * length
    return args if len(args) == length else None


def _built(path: str, make, *args, **kwargs):
    """``make(*args, **kwargs)``, its TypeError or ValueError prefixed with the field ``path`` it builds."""
    try:
        return make(*args, **kwargs)
    except (TypeError, ValueError) as error:
        if not path:
            raise
        raise type(error)(f"{path}: {error}") from None


def _from_fields(path: str, kind, values: dict):
    """The dataclass ``kind`` from a dict of its fields, unknown names refused."""
    fields = _field_types(kind)
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ValueError(f"unknown configuration field {_join(path, unknown[0])!r}; fields of "
                         f"{path or 'a configuration'}: {', '.join(fields)}")
    converted = {name: _canonical(_join(path, name), value, fields[name]) for name, value in values.items()}
    return _built(path, kind, **converted)


def _canonical(path: str, value, kind):
    """``value`` in the one form a field ``path`` of type ``kind`` holds.

    A whole number in a float field becomes a float, a list in a tuple field a tuple, a dict in
    a dataclass field that dataclass; a dataclass is rebuilt from its fields, each canonical, and
    lists and dicts are copied, so a config never shares them with another. So a config built in
    Python, loaded from JSON or changed by --set compares and hashes alike. Values of another
    type are left for :func:`validate` to name, except where a dataclass goes.
    """
    optional = _optional_of(kind)
    if value is None and optional is not None:
        return None
    kind = optional or kind
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if typing.get_origin(kind) is tuple and isinstance(value, (list, tuple)):
        items = _tuple_items(kind, len(value))
        if items is None:
            return tuple(value)
        return tuple(_canonical(f"{path}[{index}]", item, item_kind)
                     for index, (item, item_kind) in enumerate(zip(value, items)))
    if typing.get_origin(kind) in (list, dict) and isinstance(value, (list, dict)):
        return copy.deepcopy(value)
    if dataclasses.is_dataclass(kind):
        if isinstance(value, kind):
            value = {f.name: getattr(value, f.name) for f in dataclasses.fields(kind)}
        if not isinstance(value, dict):
            off = "None (off), " if optional else ""
            raise TypeError(f"{path} must be {off}a {kind.__name__} or a dict of its fields "
                            f"({', '.join(_field_types(kind))}), got {type(value).__name__} {value!r}")
        return _from_fields(path, kind, value)
    return value


def _is_instance(value, kind) -> bool:
    optional = _optional_of(kind)
    if optional is not None:
        return value is None or _is_instance(value, optional)
    origin = typing.get_origin(kind)
    if origin is tuple:
        items = _tuple_items(kind, len(value)) if isinstance(value, tuple) else None
        return items is not None and all(map(_is_instance, value, items))
    if origin is not None:  # list[...], dict[...]: their items are validate()'s to judge
        return isinstance(value, origin)
    if kind is bool:
        return isinstance(value, bool)
    return isinstance(value, kind) and not isinstance(value, bool)


def _type_name(kind) -> str:
    optional = _optional_of(kind)
    if optional is not None and dataclasses.is_dataclass(optional):
        return (f"None (off) or a dict of {optional.__name__}'s fields ({', '.join(_field_types(optional))}; "
                f"{{}} for its defaults)")
    return kind.__name__ if typing.get_origin(kind) is None and hasattr(kind, "__name__") else str(kind)


def _parse(path: str, text: str, kind):
    """``text`` as a value of the field ``path``'s type ``kind``: the text itself for a str, else a Python literal."""
    if kind is str:
        return text
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise ValueError(f"not a Python literal; expected {_type_name(kind)}") from None
    value = _canonical(path, value, kind)
    if not _is_instance(value, kind):
        raise ValueError(f"expected {_type_name(kind)}, got {type(value).__name__}")
    return value


def _sections(kind) -> list[str]:
    return [name for name, field_kind in _field_types(kind).items()
            if dataclasses.is_dataclass(_optional_of(field_kind) or field_kind)]


def _assign(target, names: list[str], text: str, path: str):
    """A copy of the dataclass ``target`` (at ``path``) with its field at dotted ``names`` set from ``text``."""
    name, rest = names[0], names[1:]
    here = _join(path, name)
    kinds = _field_types(type(target))
    if name not in kinds and rest:
        raise ValueError(f"no section {here!r}; sections{' of ' + path if path else ''}: "
                         f"{', '.join(_sections(type(target)))}")
    if name not in kinds:
        settable = [field_name for field_name, kind in kinds.items() if not _is_section(kind)]
        raise ValueError(f"unknown field {name!r}; fields here: {', '.join(settable)}")
    kind, current = kinds[name], getattr(target, name)
    if rest:
        group = _optional_of(kind)
        if current is None and dataclasses.is_dataclass(group):
            raise ValueError(f"{here} is off (None); turn it on first: --set {here}={{}} for its defaults, or a "
                             f"dict of its fields ({', '.join(_field_types(group))})")
        if not dataclasses.is_dataclass(current):
            raise ValueError(f"{here} is a field, not a section; write --set {here}=value")
        value = _assign(current, rest, text, here)
    elif _is_section(kind):
        raise ValueError(f"{here} is a section; set its fields one by one: {here}.{next(iter(_field_types(kind)))}"
                         f"=..., ...")
    else:
        value = _parse(here, text, kind)
    return _built(path, dataclasses.replace, target, **{name: value})


def override(config: TrainConfig, assignments: list[str]) -> TrainConfig:
    """A validated copy of ``config`` with each ``"section.field=value"`` (or top-level ``"field=value"``) applied.

    ``value`` is a Python literal of the field's type (a str field takes the text as it is);
    ``"section.group.field=value"`` sets one field of an option group that is on. Any fault
    raises ValueError naming the assignment: what is wrong is the text given.

        >>> override(TrainConfig(), ["methods.colout.p_row=0.1"])
        Traceback (most recent call last):
        ...
        ValueError: --set methods.colout.p_row=0.1: methods.colout is off (None); turn it on first: --set methods.colout={} ...
    """
    config = dataclasses.replace(config)  # a copy, even with no assignments
    for assignment in assignments:
        path, sep, text = assignment.partition("=")
        if not sep:
            raise ValueError(f"--set expects section.field=value, got {assignment!r}")
        path, text = path.strip(), text.strip()
        try:
            config = _assign(config, path.split("."), text, "")
        except (TypeError, ValueError) as error:
            raise ValueError(f"--set {path}={text}: {error}") from None
    try:
        validate(config)
    except TypeError as error:  # a value of the wrong type inside a list or dict (model.options) is a bad text too
        raise ValueError(str(error)) from None
    return config


# ----------------------------------------------------------------------------------------
# Validation
# ----------------------------------------------------------------------------------------


def validate(config: TrainConfig) -> None:
    """Raise TypeError (wrong type) or ValueError (wrong value) naming the first field that cannot work.

    >>> from fastcore_ops.surgery.stochastic_depth import StochasticDepthOptions
    >>> validate(TrainConfig(methods=MethodsConfig(stochastic_depth=StochasticDepthOptions(drop_rate=1.5))))
    Traceback (most recent call last):
    ...
    ValueError: methods.stochastic_depth: drop_rate must be a number in [0, 1), ...
    """
    if not isinstance(config.name, str):
        raise TypeError(f"name must be a str, got {type(config.name).__name__} {config.name!r}")
    check_choice("task", config.task, TASKS)
    check_choice("precision", config.precision, PRECISIONS)
    check_bool("compile", config.compile)
    check_int("seed", config.seed, low=0)
    _validate_model(config.model, config.task)
    _validate_optimizer(config.optimizer)
    _validate_schedule(config.schedule)
    _validate_data(config.data)
    _validate_text(config.text)
    _validate_methods(config)


def _validate_model(model: ModelConfig, task: str) -> None:
    check_str("model.name", model.name)
    if not isinstance(model.options, dict):
        raise TypeError(f"model.options must be a dict of the model builder's options, got "
                        f"{type(model.options).__name__} {model.options!r}")
    try:
        restored = json.loads(json.dumps(model.options)) == model.options
    except (TypeError, ValueError):
        restored = False
    if not restored:
        raise ValueError(f"model.options must hold JSON values (str keys; numbers, strings, booleans, None, lists "
                         f"and dicts of them) so that config.json restores them, got {model.options!r}")
    if task == "language_model" and model.name not in names("language_model"):
        raise ValueError(f"model.name must be one of {', '.join(names('language_model'))} for task "
                         f"'language_model', got {model.name!r}; set it with the task (--set model.name=gpt)")
    if task == "image_classification":

        if not is_known_model(model.name):
            raise ValueError(f"model.name must be one of training.models' models or a torchvision classifier "
                             f"(cifar_resnet20, resnet50, ...; training.models.model_names() lists them), "
                             f"got {model.name!r}")
        if model.options:
            raise ValueError(f"model.options must be {{}} for an image classifier (training.models.build_model "
                             f"takes no options), got {model.options!r}")


def _validate_optimizer(optimizer: OptimizerConfig) -> None:
    check_choice("optimizer.name", optimizer.name, OPTIMIZERS)
    check_number("optimizer.lr", optimizer.lr, low=0, low_open=True)
    check_int("optimizer.reference_batch", optimizer.reference_batch, low=1)
    check_number("optimizer.momentum", optimizer.momentum, low=0, high=1, high_open=True)
    if not (isinstance(optimizer.betas, tuple) and len(optimizer.betas) == 2):
        raise TypeError(f"optimizer.betas must be a (beta1, beta2) pair, got {optimizer.betas!r}")
    for index, beta in enumerate(optimizer.betas):
        check_number(f"optimizer.betas[{index}]", beta, low=0, high=1, high_open=True)
    check_number("optimizer.eps", optimizer.eps, low=0, low_open=True)
    check_number("optimizer.weight_decay", optimizer.weight_decay, low=0)
    for flag in ("nesterov", "decoupled_weight_decay", "no_decay_norm_and_bias", "no_decay_embeddings"):
        check_bool(f"optimizer.{flag}", getattr(optimizer, flag))
    check_number("optimizer.grad_clip_norm (0 = off)", optimizer.grad_clip_norm, low=0)
    check_number("optimizer.trust_coefficient", optimizer.trust_coefficient, low=0, low_open=True)
    if optimizer.nesterov and optimizer.name in ("adamw", "lamb"):
        raise ValueError(f"optimizer.nesterov must be False with optimizer.name={optimizer.name!r} (Nesterov "
                         f"momentum is SGD's and LARS's; its momentum is betas[0]), got True")
    if optimizer.decoupled_weight_decay and optimizer.name in ("lamb", "lars"):
        raise ValueError(f"optimizer.decoupled_weight_decay must be False with optimizer.name={optimizer.name!r}: "
                         f"it adds the decay to the update before the trust ratio, as its paper does")
    if optimizer.nesterov and optimizer.momentum == 0:
        raise ValueError("optimizer.nesterov must be False when optimizer.momentum is 0 (Nesterov needs "
                         "momentum), got True")


def _validate_schedule(schedule: ScheduleConfig) -> None:
    check_number("schedule.epochs", schedule.epochs, low=0, low_open=True)
    check_number("schedule.warmup_epochs", schedule.warmup_epochs, low=0)
    if schedule.warmup_epochs > schedule.epochs:
        raise ValueError(f"schedule.warmup_epochs must be in [0, schedule.epochs={schedule.epochs}], "
                         f"got {schedule.warmup_epochs!r}")
    check_number("schedule.final_lr_fraction", schedule.final_lr_fraction, low=0, high=1)
    check_number("schedule.scale_schedule_ratio", schedule.scale_schedule_ratio, low=0, low_open=True)


def _validate_data(data: DataConfig) -> None:
    check_int("data.batch_size", data.batch_size, low=1)
    check_int("data.train_size", data.train_size, low=1)
    check_int("data.eval_size", data.eval_size, low=1)
    check_int("data.eval_resize", data.eval_resize, low=data.eval_size)
    check_interval("data.crop_scale", data.crop_scale, high=1.0)
    check_choice("data.backend", data.backend, BACKENDS)
    check_int("data.num_workers (-1 = one per core)", data.num_workers, low=-1)
    check_bool("data.flip", data.flip)


def _validate_text(text: TextConfig) -> None:
    check_choice("text.tokenizer", text.tokenizer, TOKENIZERS)
    check_int("text.vocab_size", text.vocab_size, low=257)  # the 256 byte tokens and at least one merge
    check_int("text.sequence_length", text.sequence_length, low=1)
    check_int("text.validation_every", text.validation_every, low=2)  # 1 would leave no training file
    multiples = text.eval_length_multiples
    if not (isinstance(multiples, tuple) and multiples):
        raise TypeError(f"text.eval_length_multiples must be a non-empty tuple of ints, got {multiples!r}")
    for index, multiple in enumerate(multiples):
        check_int(f"text.eval_length_multiples[{index}]", multiple, low=1)
    if list(multiples) != sorted(set(multiples)):
        raise ValueError(f"text.eval_length_multiples must increase, each multiple once, got {multiples!r}")
    longest = text.sequence_length * multiples[-1]
    check_int(f"text.eval_batch_tokens (at least one sequence of the longest evaluation length, {longest})",
              text.eval_batch_tokens, low=longest)


def _validate_methods(config: TrainConfig) -> None:
    """Each method that is on: its options' type, its task, and what it declares about the rest of the run."""
    for method in all_methods():
        options = getattr(config.methods, method.name)
        if options is not None and not isinstance(options, method.options):
            raise TypeError(f"methods.{method.name} must be None (off) or a {method.options.__name__}, got "
                            f"{type(options).__name__} {options!r}")
    chosen = active(config.methods)
    for method, options in chosen:
        if not method.applies_to(config.task):
            raise ValueError(f"methods.{method.name} applies to task {method.tasks[0]!r} only, and this run's task is "
                             f"{config.task!r}; set methods.{method.name}=None")
        if method.check is not None:
            _built(f"methods.{method.name}", method.check, options, config)
    mixing = [method.name for method, _ in chosen if method.mixes_batch]
    if len(mixing) > 1:
        raise ValueError(f"methods.{mixing[1]} must be None when methods.{mixing[0]} is on (one batch mixing at a "
                         f"time)")


# ----------------------------------------------------------------------------------------
# JSON and hashes
# ----------------------------------------------------------------------------------------


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
    config = _from_fields("", TrainConfig, values)
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
        values = json.loads(path.read_text())
    except OSError as error:
        raise ValueError(f"cannot read the configuration {path}: {error.strerror or error}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"the configuration {path} is not valid JSON: {error}") from None
    try:
        return from_dict(values)
    except (TypeError, ValueError) as error:
        raise ValueError(f"the configuration {path} is not usable: {error}") from None


def config_hash(config: TrainConfig) -> str:
    """12 hex digits that change with any field (the run's name does not count)."""
    values = to_dict(config)
    values.pop("name")
    return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()[:12]
