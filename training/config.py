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

    lr: float = 0.1  # peak learning rate, reached at the end of warmup
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
    backend: str = "auto"
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
    """Raise ValueError naming the first field whose value cannot work."""
    checks = [
        ("precision", config.precision in PRECISIONS, f"one of {PRECISIONS}"),
        ("methods.loss", config.methods.loss in LOSSES, f"one of {LOSSES}"),
        ("optimizer.lr", config.optimizer.lr > 0, "> 0"),
        ("optimizer.momentum", 0 <= config.optimizer.momentum < 1, "in [0, 1)"),
        ("optimizer.weight_decay", config.optimizer.weight_decay >= 0, ">= 0"),
        ("schedule.epochs", config.schedule.epochs > 0, "> 0"),
        ("schedule.warmup_epochs", 0 <= config.schedule.warmup_epochs <= config.schedule.epochs,
         "in [0, schedule.epochs]"),
        ("schedule.final_lr_fraction", 0 <= config.schedule.final_lr_fraction <= 1, "in [0, 1]"),
        ("schedule.scale_schedule_ratio", config.schedule.scale_schedule_ratio > 0, "> 0"),
        ("data.batch_size", config.data.batch_size >= 1, ">= 1"),
        ("data.eval_resize", config.data.eval_resize >= config.data.eval_size, ">= data.eval_size"),
        ("data.num_workers", config.data.num_workers >= -1, ">= 0, or -1 for one per core"),
        ("methods.label_smoothing", 0 <= config.methods.label_smoothing < 1, "in [0, 1)"),
        ("methods.mixup_alpha", config.methods.mixup_alpha >= 0, ">= 0"),
        ("methods.cutmix_alpha", config.methods.cutmix_alpha >= 0 and not (
            config.methods.cutmix_alpha and config.methods.mixup_alpha), ">= 0, and 0 when mixup_alpha is set"),
        ("methods.sam_rho", config.methods.sam_rho >= 0, ">= 0"),
        ("methods.sam_interval", config.methods.sam_interval >= 1, ">= 1"),
        ("methods.ema_half_life_steps", config.methods.ema_half_life_steps >= 0, ">= 0"),
        ("methods.swa_start", 0 <= config.methods.swa_start < config.methods.swa_end <= 1,
         "in [0, methods.swa_end), with swa_end <= 1"),
        ("methods.freeze_level", 0 <= config.methods.freeze_level <= 1, "in [0, 1]"),
        ("methods.freeze_start", 0 <= config.methods.freeze_start < 1, "in [0, 1)"),
    ]
    for name, ok, accepted in checks:
        if not ok:
            section, _, leaf = name.rpartition(".")
            value = getattr(getattr(config, section) if section else config, leaf)
            raise ValueError(f"{name} must be {accepted}, got {value!r}")


def to_dict(config: TrainConfig) -> dict:
    return dataclasses.asdict(config)


def from_dict(values: dict) -> TrainConfig:
    """The config saved by :func:`to_dict` (a run's ``config.json``)."""
    sections = {f.name: f.type for f in dataclasses.fields(TrainConfig)}
    kinds = _field_types(TrainConfig)
    kwargs = {}
    for name, value in values.items():
        if name not in sections:
            raise ValueError(f"unknown configuration field {name!r}")
        kind = kinds[name]
        if dataclasses.is_dataclass(kind):
            inner = _field_types(kind)
            value = kind(**{k: tuple(v) if typing.get_origin(inner.get(k)) is tuple else v for k, v in value.items()})
        kwargs[name] = value
    config = TrainConfig(**kwargs)
    validate(config)
    return config


def config_hash(config: TrainConfig) -> str:
    """12 hex digits that change with any field (the run's name does not count)."""
    values = to_dict(config)
    values.pop("name")
    return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()[:12]
