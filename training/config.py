"""A training run's configuration: typed dataclasses, overridable field by field from the command line.

Recipes are instances of :class:`TrainConfig` (see ``training/recipes/``); nothing else decides
how a run trains. ``--set section.field=value`` overrides any field with a value of its type, and
the effective configuration is saved with the run (``config.json``) and hashed to name it.

    >>> config = TrainConfig()
    >>> config = override(config, ["optimizer.lr=0.4", "methods.mixup_alpha=0.2"])
    >>> config.optimizer.lr
    0.4
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import typing
from dataclasses import dataclass, field
from pathlib import Path

from fastcore_ops.checks import check_bool, check_choice, check_int, check_interval, check_number
from fastcore_ops.data.loader import BACKENDS
from fastcore_ops.data.randaugment import MAX_SEVERITY

PRECISIONS = ("fp32", "amp", "amp_bf16", "amp_fp16")
LOSSES = ("ce", "bce")


@dataclass
class ModelConfig:
    # A torchvision classification model ("resnet50", ...) or one of training.models ("cifar_resnet20", ...).
    name: str = "resnet50"
    blurpool: bool = False
    squeeze_excite: bool = False
    stochastic_depth: float = 0.0  # drop rate of the deepest residual block, linear in depth; 0 = off
    ghost_batch_size: int = 0  # samples per ghost batch in BatchNorm; 0 = ordinary BatchNorm
    channels_last: bool = False


@dataclass
class OptimizerConfig:
    """SGD with momentum, the optimizer of every recipe here."""

    # Peak learning rate (reached at the end of warmup) for a global batch of reference_batch
    # images; the run scales it linearly to its own global batch, data.batch_size x processes.
    # A --set optimizer.lr=X override is scaled too: X is the LR at reference_batch.
    lr: float = 0.1
    reference_batch: int = 256  # the global batch that lr was written for
    momentum: float = 0.9
    nesterov: bool = False
    weight_decay: float = 5e-4
    # SGDW: decay applied to the weights directly, scaled by lr / peak lr, not added to the gradient.
    decoupled_weight_decay: bool = False
    no_decay_norm_and_bias: bool = False  # no weight decay on normalization weights and on biases


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
    randaugment_depth: int = 0  # ops per image; 0 = off
    randaugment_severity: float = 9.0
    colout: float = 0.0  # fraction of rows and of columns dropped; 0 = off
    progressive_resize: bool = False
    resize_initial_scale: float = 0.5
    resize_delay_fraction: float = 0.4
    resize_finetune_fraction: float = 0.2
    resize_size_increment: int = 4


@dataclass
class MethodsConfig:
    loss: str = "ce"  # "ce" (softmax cross-entropy) or "bce" (fused kernel, classifier bias -log C)
    label_smoothing: float = 0.0
    mixup_alpha: float = 0.0  # 0 = off
    cutmix_alpha: float = 0.0  # 0 = off; not together with MixUp
    sam_rho: float = 0.0  # 0 = off
    sam_interval: int = 1  # SAM's second pass every this many steps
    ema_half_life_steps: int = 0  # 0 = off; evaluation then uses the EMA weights
    swa: bool = False
    swa_start: float = 0.7  # fractions of training
    swa_end: float = 1.0
    swa_lr: float = 0.01
    freeze_start: float = 0.0  # fraction of training where freezing begins
    freeze_level: float = 0.0  # fraction of layers frozen by the end; 0 = off


@dataclass
class TrainConfig:
    name: str = "custom"
    model: ModelConfig = field(default_factory=ModelConfig)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    data: DataConfig = field(default_factory=DataConfig)
    methods: MethodsConfig = field(default_factory=MethodsConfig)
    # "amp": bf16 autocast on the CPU, fp16 with a grad scaler on CUDA; or name one; "fp32" = off.
    precision: str = "amp"
    seed: int = 0


def _field_types(cls) -> dict[str, object]:
    return typing.get_type_hints(cls)


def _coerce(path: str, text: str, kind: object):
    """``text`` as a value of type ``kind``, or a ValueError naming the field."""
    if kind is str:
        return text
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise ValueError(f"--set {path}={text}: not a Python literal; expected {_type_name(kind)}") from None
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if typing.get_origin(kind) is tuple and isinstance(value, (list, tuple)):
        value = tuple(float(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in value)
    if not _is_instance(value, kind):
        raise ValueError(f"--set {path}={text}: expected {_type_name(kind)}, got {type(value).__name__}")
    return value


def _is_instance(value, kind) -> bool:
    origin = typing.get_origin(kind)
    if origin is tuple:
        args = typing.get_args(kind)
        return isinstance(value, tuple) and len(value) == len(args) and all(map(_is_instance, value, args))
    if kind is bool:
        return isinstance(value, bool)
    return isinstance(value, kind) and not isinstance(value, bool)


def _type_name(kind) -> str:
    return getattr(kind, "__name__", str(kind)) if typing.get_origin(kind) is None else str(kind)


def override(config: TrainConfig, assignments: list[str]) -> TrainConfig:
    """A copy of ``config`` with each ``"section.field=value"`` (or top-level ``"field=value"``) applied."""
    config = dataclasses.replace(config)
    for assignment in assignments:
        path, sep, text = assignment.partition("=")
        if not sep:
            raise ValueError(f"--set expects section.field=value, got {assignment!r}")
        *sections, name = path.strip().split(".")
        target = config
        for section in sections:
            if not dataclasses.is_dataclass(getattr(target, section, None)):
                raise ValueError(f"--set {path}: no section {section!r}; sections: {', '.join(_sections())}")
            # Copy the section so the caller's config (a recipe constant) is never changed.
            setattr(target, section, dataclasses.replace(getattr(target, section)))
            target = getattr(target, section)
        kinds = _field_types(type(target))
        if name not in kinds or dataclasses.is_dataclass(getattr(target, name)):
            known = ", ".join(f for f in kinds if not dataclasses.is_dataclass(getattr(target, f)))
            raise ValueError(f"--set {path}: unknown field {name!r}; fields here: {known}")
        setattr(target, name, _coerce(path, text.strip(), kinds[name]))
    validate(config)
    return config


def _sections() -> list[str]:
    return [f.name for f in dataclasses.fields(TrainConfig) if f.default_factory is not dataclasses.MISSING]


def validate(config: TrainConfig) -> None:
    """Raise TypeError (wrong type) or ValueError (wrong value) naming the first field that cannot work.

    >>> validate(dataclasses.replace(TrainConfig(), model=ModelConfig(stochastic_depth=1.5)))
    Traceback (most recent call last):
    ...
    ValueError: model.stochastic_depth must be a number in [0, 1), got 1.5
    """
    if not isinstance(config.name, str):
        raise TypeError(f"name must be a str, got {type(config.name).__name__} {config.name!r}")
    check_choice("precision", config.precision, PRECISIONS)
    check_int("seed", config.seed, low=0)
    _validate_model(config.model)
    _validate_optimizer(config.optimizer)
    _validate_schedule(config.schedule)
    _validate_data(config.data)
    _validate_methods(config.methods)


def _validate_model(model: ModelConfig) -> None:
    from training.models import is_known_model  # here: the models import torchvision, configs need not

    if not isinstance(model.name, str) or not is_known_model(model.name):
        raise ValueError(f"model.name must be one of training.models' models or a torchvision classifier "
                         f"(cifar_resnet20, resnet50, ...; training.models.model_names() lists them), "
                         f"got {model.name!r}")
    for flag in ("blurpool", "squeeze_excite", "channels_last"):
        check_bool(f"model.{flag}", getattr(model, flag))
    check_number("model.stochastic_depth", model.stochastic_depth, low=0, high=1, high_open=True)
    check_int("model.ghost_batch_size", model.ghost_batch_size, low=0)
    if model.ghost_batch_size == 1:  # BatchNorm over one sample has no variance
        raise ValueError(f"model.ghost_batch_size must be 0 (off) or an int >= 2, got {model.ghost_batch_size}")


def _validate_optimizer(optimizer: OptimizerConfig) -> None:
    check_number("optimizer.lr", optimizer.lr, low=0, low_open=True)
    check_int("optimizer.reference_batch", optimizer.reference_batch, low=1)
    check_number("optimizer.momentum", optimizer.momentum, low=0, high=1, high_open=True)
    check_number("optimizer.weight_decay", optimizer.weight_decay, low=0)
    for flag in ("nesterov", "decoupled_weight_decay", "no_decay_norm_and_bias"):
        check_bool(f"optimizer.{flag}", getattr(optimizer, flag))
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
    check_int("data.randaugment_depth", data.randaugment_depth, low=0)
    check_number("data.randaugment_severity", data.randaugment_severity, low=0, high=MAX_SEVERITY)
    check_number("data.colout", data.colout, low=0, high=1, high_open=True)
    check_bool("data.progressive_resize", data.progressive_resize)
    check_number("data.resize_initial_scale", data.resize_initial_scale, low=0, high=1, low_open=True)
    check_number("data.resize_delay_fraction", data.resize_delay_fraction, low=0, high=1)
    check_number("data.resize_finetune_fraction", data.resize_finetune_fraction, low=0, high=1)
    if data.resize_delay_fraction + data.resize_finetune_fraction > 1:
        raise ValueError(f"data.resize_delay_fraction + data.resize_finetune_fraction must be <= 1 (parts of one "
                         f"run), got {data.resize_delay_fraction} + {data.resize_finetune_fraction}")
    check_int("data.resize_size_increment", data.resize_size_increment, low=1)


def _validate_methods(methods: MethodsConfig) -> None:
    check_choice("methods.loss", methods.loss, LOSSES)
    check_number("methods.label_smoothing", methods.label_smoothing, low=0, high=1, high_open=True)
    check_number("methods.mixup_alpha", methods.mixup_alpha, low=0)
    check_number("methods.cutmix_alpha", methods.cutmix_alpha, low=0)
    if methods.cutmix_alpha and methods.mixup_alpha:
        raise ValueError(f"methods.cutmix_alpha must be 0 when mixup_alpha is set (one batch mixing at a time), "
                         f"got {methods.cutmix_alpha!r}")
    check_number("methods.sam_rho", methods.sam_rho, low=0)
    check_int("methods.sam_interval", methods.sam_interval, low=1)
    check_int("methods.ema_half_life_steps", methods.ema_half_life_steps, low=0)
    check_bool("methods.swa", methods.swa)
    check_number("methods.swa_start", methods.swa_start, low=0, high=1, high_open=True)
    check_number("methods.swa_end", methods.swa_end, low=0, high=1)
    if methods.swa_end <= methods.swa_start:
        raise ValueError(f"methods.swa_end must be in (methods.swa_start={methods.swa_start}, 1], "
                         f"got {methods.swa_end!r}")
    check_number("methods.swa_lr", methods.swa_lr, low=0, low_open=True)
    check_number("methods.freeze_start", methods.freeze_start, low=0, high=1, high_open=True)
    check_number("methods.freeze_level", methods.freeze_level, low=0, high=1)


def to_dict(config: TrainConfig) -> dict:
    return dataclasses.asdict(config)


def _section_from_dict(section: str, kind, values) -> object:
    if not isinstance(values, dict):
        raise ValueError(f"configuration section {section!r} must be an object of fields, got {values!r}")
    fields = _field_types(kind)
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ValueError(f"unknown configuration field {section}.{unknown[0]!r}; fields here: {', '.join(fields)}")
    return kind(**{name: tuple(value) if typing.get_origin(fields[name]) is tuple and isinstance(value, list)
                   else value for name, value in values.items()})


def from_dict(values: dict) -> TrainConfig:
    """The config saved by :func:`to_dict` (a run's ``config.json``), validated.

    >>> from_dict(to_dict(TrainConfig())) == TrainConfig()
    True
    """
    if not isinstance(values, dict):
        raise ValueError(f"a configuration must be an object of sections, got {type(values).__name__}")
    kinds = _field_types(TrainConfig)
    kwargs = {}
    for name, value in values.items():
        if name not in kinds:
            raise ValueError(f"unknown configuration field {name!r}")
        kwargs[name] = _section_from_dict(name, kinds[name], value) if dataclasses.is_dataclass(kinds[name]) else value
    config = TrainConfig(**kwargs)
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
