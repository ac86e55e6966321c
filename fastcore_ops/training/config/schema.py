"""The sections of a training run's configuration, as typed dataclasses (see :mod:`fastcore_ops.training.config`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from fastcore_ops.training.config.fields import canonical, field_types
from fastcore_ops.training.methods.registry import RegisteredMethod, all_methods, on_registration

PRECISIONS = ("fp32", "amp", "amp_bf16", "amp_fp16")
OPTIMIZERS = ("sgd", "adamw", "lamb", "lars")
TOKENIZERS = ("bytes", "bpe")


@dataclass
class ModelConfig:
    """The model and its builder's options; the surgeries that rewrite it are methods (``methods.blurpool``, ...)."""

    # image_classification: a torchvision classifier ("resnet50", ...) or one of fastcore_ops.training.models
    # ("cifar_resnet20", ...); language_model: a registered language model (fastcore_ops.training.models).
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
    """Length of training and the learning-rate schedule: linear warmup, then cosine (or linear) decay."""

    epochs: float = 90.0  # may be fractional; the run stops at the step that ends it
    warmup_epochs: float = 0.0
    final_lr_fraction: float = 0.0  # the decay ends at peak lr times this
    warmup_start_fraction: float = 0.0  # the warmup rises linearly from peak lr times this (0: from ~0)
    lr_decay: str = "cosine"  # after warmup: "cosine", or "linear" (a triangle with the warmup, as airbench94's)
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
    num_workers: int = -1  # decoding workers; -1 = on a CPU the CPUs the step's threads leave, else one per core
    flip: bool = True


def _methods_section() -> type:
    """The ``methods`` section: one field per registered method, its options dataclass or None (off)."""
    section = dataclasses.make_dataclass(
        "MethodsConfig", [(method.name, method.options | None, field(default=None)) for method in all_methods()])
    section.__module__ = __name__
    section.__doc__ = ("Each registered method's options, or None when it is off (fastcore_ops.training.methods.registry). "
                       "Stages run in order: surgeries, model, loader, loss, step, evaluation.")
    return section


MethodsConfig = _methods_section()


def _add_method_field(method: RegisteredMethod) -> None:
    """Give ``MethodsConfig`` a field (off) for ``method``, registered after it was built (``--import``).

    The class itself gains it, not a new class: the recipes already made hold instances of it, and modules
    hold it by name. Those instances read the new field's default (None) from the class. Its generated
    methods are dropped first, as the dataclass decorator writes only those a class lacks.
    """
    if method.name in MethodsConfig.__dataclass_fields__:  # the same options, registered again
        return
    MethodsConfig.__annotations__[method.name] = method.options | None
    setattr(MethodsConfig, method.name, field(default=None))
    for generated in ("__init__", "__repr__", "__eq__", "__match_args__"):
        if generated in MethodsConfig.__dict__:
            delattr(MethodsConfig, generated)
    dataclass(MethodsConfig)
    field_types.cache_clear()


on_registration(_add_method_field)


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
    # A registered task (fastcore_ops.training.tasks.registry.task_names()): what the data is, and which models and methods apply.
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
        # Built in Python, from JSON or by --set, equal settings end as equal values (see canonical).
        for name, kind in field_types(TrainConfig).items():
            setattr(self, name, canonical(name, getattr(self, name), kind))

