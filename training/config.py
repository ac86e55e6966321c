"""A training run's configuration: typed dataclasses, overridable field by field from the command line.

Recipes are instances of :class:`TrainConfig` (see ``training/recipes/``); nothing else decides
how a run trains. Each option is declared once: a model's surgeries are the list
:func:`fastcore_ops.apply_surgery` takes, the augmentations are ``fastcore_ops.data``'s own
option dataclasses. The effective configuration is saved with the run (``config.json``) and
hashed to name it.

``--set section.field=value`` overrides any field with a Python literal of its type (a str
field takes the text as it is), lists and dicts included. An option group
(``data.randaugment``, ``data.colout``, ``data.padded_crop``, ``data.progressive_resize``,
``methods.cutout``, ``methods.augmix``, ``methods.tta``, ``methods.seq_length_warmup``,
``methods.selective_backprop``, ``methods.patch_whitening``) is None when off:
``--set data.randaugment={}`` turns it on with its defaults (or give a dict of some of its
fields), ``--set data.randaugment.depth=2`` sets one field of a group that is on, and
``--set data.randaugment=None`` turns it off.

    >>> config = override(TrainConfig(), ["optimizer.lr=0.4", "data.randaugment={}", "data.randaugment.depth=2",
    ...                                   "model.surgeries=['blurpool', ['stochastic_depth', {'drop_rate': 0.1}]]"])
    >>> config.optimizer.lr, config.data.randaugment
    (0.4, RandAugmentOptions(depth=2, severity=9.0))
    >>> config.model.surgeries  # a pair is a tuple, however it was written: one form, one hash
    ['blurpool', ('stochastic_depth', {'drop_rate': 0.1})]
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

from fastcore_ops import list_surgeries
from fastcore_ops.checks import check_bool, check_choice, check_int, check_interval, check_number, check_str
from fastcore_ops.data import ColOutOptions, PaddedCropOptions, ProgressiveResize, RandAugmentOptions
from fastcore_ops.data.loader import BACKENDS
from fastcore_ops.surgery import check_surgeries
from training.methods.augmix import AugMixOptions
from training.methods.cutout import CutoutOptions
from training.methods.patch_whitening import PatchWhiteningOptions
from training.methods.selective_backprop import SelectiveBackpropOptions
from training.methods.seq_length_warmup import SeqLengthWarmupOptions
from training.methods.tta import TTAOptions
from training.models import is_known_model
from training.models.registry import TASKS, names

PRECISIONS = ("fp32", "amp", "amp_bf16", "amp_fp16")
LOSSES = ("ce", "bce")
OPTIMIZERS = ("sgd", "adamw", "lamb", "lars")
TOKENIZERS = ("bytes", "bpe")


def _surgery_entry(entry) -> tuple[str, dict] | None:
    """(name, options) of a ``model.surgeries`` entry: a name, or a name and options as a tuple or list."""
    if isinstance(entry, str):
        return entry, {}
    if isinstance(entry, (tuple, list)) and len(entry) == 2:
        name, options = entry
        if isinstance(name, str) and isinstance(options, dict):
            return name, options
    return None


def _normalized_surgeries(surgeries):
    """Each entry as a bare name or a ``(name, options)`` tuple; malformed ones are left for validate()."""
    if not isinstance(surgeries, (list, tuple)):
        return surgeries
    normalized = []
    for entry in surgeries:
        parsed = _surgery_entry(entry)
        if parsed is None:
            normalized.append(entry)
        else:
            name, options = parsed
            normalized.append((name, dict(options)) if options else name)
    return normalized


@dataclass
class ModelConfig:
    """The model, its builder's options, and the surgeries that rewrite it before training.

    ``surgeries`` goes to :func:`fastcore_ops.apply_surgery` as it is, in order: each entry a
    surgery name or a ``(name, {option: value})`` pair (``fastcore_ops.list_surgeries()`` lists
    the surgeries and their options). JSON has no tuples, so a pair may be a list; either way
    it is stored as a tuple, and a pair without options as the bare name.

        >>> model = ModelConfig("cifar_resnet20",
        ...                     surgeries=[["blurpool", {}], ["stochastic_depth", {"drop_rate": 0.1}]])
        >>> model.surgeries, model.has_surgery("stochastic_depth"), model.has_surgery("channels_last")
        (['blurpool', ('stochastic_depth', {'drop_rate': 0.1})], True, False)
    """

    # image_classification: a torchvision classifier ("resnet50", ...) or one of training.models
    # ("cifar_resnet20", ...); language_model: a registered language model (training.models).
    name: str = "resnet50"
    # Keyword options of the model's builder: GPTConfig's fields for "gpt", GPT2Config's for
    # "hf_gpt2"; the image classifiers take none. JSON values, so that config.json restores them.
    options: dict[str, object] = field(default_factory=dict)
    surgeries: list[str | tuple[str, dict]] = field(default_factory=list)

    def __post_init__(self):
        self.surgeries = _normalized_surgeries(self.surgeries)

    def has_surgery(self, name: str) -> bool:
        """Whether the surgery ``name`` is among :attr:`surgeries`, with options or without."""
        return any(entry == name or (isinstance(entry, tuple) and entry[:1] == (name,)) for entry in self.surgeries)


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
    # The device-stage augmentations, None = off; build_loader takes these option objects as they are.
    randaugment: RandAugmentOptions | None = None
    colout: ColOutOptions | None = None
    padded_crop: PaddedCropOptions | None = None  # CIFAR's padded random crop; with crop_scale (1, 1)
    progressive_resize: ProgressiveResize | None = None  # fractions of the run: they stretch with it


@dataclass
class MethodsConfig:
    loss: str = "ce"  # "ce" (softmax cross-entropy) or "bce" (fused kernel, classifier bias -log C; images only)
    label_smoothing: float = 0.0
    mixup_alpha: float = 0.0  # 0 = off
    cutmix_alpha: float = 0.0  # 0 = off; not together with MixUp
    cutout: CutoutOptions | None = None  # images only; None = off
    augmix: AugMixOptions | None = None  # images only; None = off
    tta: TTAOptions | None = None  # images only: evaluation also reports top1_tta; None = off
    sam_rho: float = 0.0  # 0 = off
    sam_interval: int = 1  # SAM's second pass every this many steps
    ema_half_life_steps: int = 0  # 0 = off; evaluation then uses the EMA weights
    swa: bool = False
    swa_start: float = 0.7  # fractions of training
    swa_end: float = 1.0
    swa_lr: float = 0.01
    freeze_start: float = 0.0  # fraction of training where freezing begins
    freeze_level: float = 0.0  # fraction of layers frozen by the end; 0 = off
    seq_length_warmup: SeqLengthWarmupOptions | None = None  # language models only; None = off
    selective_backprop: SelectiveBackpropOptions | None = None  # None = off
    patch_whitening: PatchWhiteningOptions | None = None  # images only: the stem starts whitening; None = off


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

        >>> override(TrainConfig(), ["data.colout.p_row=0.1"])
        Traceback (most recent call last):
        ...
        ValueError: --set data.colout.p_row=0.1: data.colout is off (None); turn it on first: --set data.colout={} ...
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
    except TypeError as error:  # a value of the wrong type inside a list or dict (model.surgeries) is a bad text too
        raise ValueError(str(error)) from None
    return config


# ----------------------------------------------------------------------------------------
# Validation
# ----------------------------------------------------------------------------------------


# Settings only one task can use, each with its value when off: validate() refuses them under
# the other task rather than ignore them.
_TASK_ONLY = {
    "image_classification": (("data.randaugment", None), ("data.colout", None), ("data.padded_crop", None),
                             ("data.progressive_resize", None),
                             ("methods.mixup_alpha", 0.0), ("methods.cutmix_alpha", 0.0), ("methods.cutout", None),
                             ("methods.augmix", None), ("methods.tta", None), ("methods.loss", "ce"),
                             ("methods.patch_whitening", None)),
    "language_model": (("methods.seq_length_warmup", None),),
}


def validate(config: TrainConfig) -> None:
    """Raise TypeError (wrong type) or ValueError (wrong value) naming the first field that cannot work.

    >>> validate(TrainConfig(model=ModelConfig(surgeries=[("stochastic_depth", {"drop_rate": 1.5})])))
    Traceback (most recent call last):
    ...
    ValueError: model.surgeries[0] ('stochastic_depth', {'drop_rate': 1.5}): drop_rate must be a number in [0, 1), ...
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
    _validate_methods(config.methods)
    _validate_text(config.text)
    _validate_task(config)


def _check_group(name: str, value, kind: type) -> None:
    if value is not None and not isinstance(value, kind):
        raise TypeError(f"{name} must be None (off) or a {kind.__name__}, got {type(value).__name__} {value!r}")


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
    _validate_surgeries(model.surgeries)


def _validate_surgeries(surgeries) -> None:
    example = "for example ['blurpool', ['stochastic_depth', {'drop_rate': 0.1}]]"
    if not isinstance(surgeries, list):
        raise TypeError(f"model.surgeries must be a list of surgery names and [name, {{options}}] pairs ({example}), "
                        f"got {type(surgeries).__name__} {surgeries!r}")
    names = [surgery["name"] for surgery in list_surgeries()]
    seen = set()
    for index, entry in enumerate(surgeries):
        where = f"model.surgeries[{index}]"
        parsed = _surgery_entry(entry)
        if parsed is None:
            raise TypeError(f"{where} must be a surgery name or a [name, {{option: value}}] pair, got {entry!r}; "
                            f"{example}")
        name, options = parsed
        if name not in names:
            raise ValueError(f"{where}: unknown surgery {name!r}; choose from: {', '.join(names)}")
        if name in seen:
            raise ValueError(f"{where}: surgery {name!r} is listed twice; list each surgery once")
        seen.add(name)
        # apply_surgery's own check of a surgery's options (names, types, ranges), which touches
        # no model: a config that validates is one apply_surgery accepts.
        _built(f"{where} {entry!r}", check_surgeries, [(name, options)])


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
    _check_group("data.randaugment", data.randaugment, RandAugmentOptions)
    _check_group("data.colout", data.colout, ColOutOptions)
    _check_group("data.padded_crop", data.padded_crop, PaddedCropOptions)
    _check_group("data.progressive_resize", data.progressive_resize, ProgressiveResize)
    # Checked here, not at the first resize halfway through the run.
    if data.progressive_resize and data.train_size % data.progressive_resize.size_increment:
        raise ValueError(f"data.progressive_resize.size_increment must divide data.train_size={data.train_size}, "
                         f"got {data.progressive_resize.size_increment}")


def _validate_methods(methods: MethodsConfig) -> None:
    check_choice("methods.loss", methods.loss, LOSSES)
    check_number("methods.label_smoothing", methods.label_smoothing, low=0, high=1, high_open=True)
    check_number("methods.mixup_alpha", methods.mixup_alpha, low=0)
    check_number("methods.cutmix_alpha", methods.cutmix_alpha, low=0)
    if methods.cutmix_alpha and methods.mixup_alpha:
        raise ValueError(f"methods.cutmix_alpha must be 0 when mixup_alpha is set (one batch mixing at a time), "
                         f"got {methods.cutmix_alpha!r}")
    _check_group("methods.cutout", methods.cutout, CutoutOptions)
    _check_group("methods.augmix", methods.augmix, AugMixOptions)
    if methods.augmix is not None and methods.augmix.jsd_weight:
        # Its batch of 3N (clean + two views) for N labels is what these methods cannot take.
        clashing = {"mixup_alpha": "MixUp", "cutmix_alpha": "CutMix", "sam_rho": "SAM",
                    "selective_backprop": "selective backprop"}
        for name, method in clashing.items():
            if getattr(methods, name):
                raise ValueError(f"methods.augmix.jsd_weight > 0 (AugMix's consistency loss) cannot be combined with "
                                 f"methods.{name} ({method}); set one of them off")
    _check_group("methods.tta", methods.tta, TTAOptions)
    _check_group("methods.patch_whitening", methods.patch_whitening, PatchWhiteningOptions)
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
    _check_group("methods.seq_length_warmup", methods.seq_length_warmup, SeqLengthWarmupOptions)
    _check_group("methods.selective_backprop", methods.selective_backprop, SelectiveBackpropOptions)


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


def _validate_task(config: TrainConfig) -> None:
    for task, settings in _TASK_ONLY.items():
        if task == config.task:
            continue
        for path, off in settings:
            value = functools.reduce(getattr, path.split("."), config)
            if value != off:
                raise ValueError(f"{path}={value!r} applies to task {task!r} only, and this run's task is "
                                 f"{config.task!r}; set {path}={off!r}")
    selective = config.methods.selective_backprop
    if config.task == "language_model" and selective is not None and selective.scale_factor != 1.0:
        raise ValueError(f"methods.selective_backprop.scale_factor resizes images; a language model's batches are "
                         f"token ids: set it to 1.0, got {selective.scale_factor}")
    warmup = config.methods.seq_length_warmup
    if warmup is not None and warmup.start_length > config.text.sequence_length:
        raise ValueError(f"methods.seq_length_warmup.start_length must be <= text.sequence_length="
                         f"{config.text.sequence_length}, got {warmup.start_length}")


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


_LATER_FIELD_DEFAULTS = {"compile": False, "data.padded_crop": None}  # dotted: a field of a section


def config_hash(config: TrainConfig) -> str:
    """12 hex digits that change with any field (the run's name does not count)."""
    values = to_dict(config)
    values.pop("name")
    # Fields added after runs were recorded leave those runs' hashes as they were while at their default.
    for name, default in _LATER_FIELD_DEFAULTS.items():
        *sections, field = name.split(".")
        holder = values
        for section in sections:
            holder = holder[section]
        if holder.get(field) == default:
            holder.pop(field)
    return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()[:12]
