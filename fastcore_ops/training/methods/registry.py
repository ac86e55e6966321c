"""The one list of training methods: each registers its options class where it is defined.

A method is one module of ``fastcore_ops/training/methods/``: its options dataclass (validated in
``__post_init__``), its functional form, its event hooks, its method card, and this
registration, which declares what the rest of the code needs to know about it: the stage it
runs in, the tasks it applies to (by what their batches hold: ``IMAGES``, ``TEXT``), whether it
trains under DDP and FSDP, and its order among the methods of its stage. The augmentations are read
from the one registry of augmentations (:mod:`fastcore_ops.data.transforms.registry`), whose order
scale the step methods share: the loader's in :mod:`fastcore_ops.training.methods.library`, and each step
augmentation (``augmentation=True``) writes itself there as it registers here. The configuration's ``methods`` section (one field per method, None = off),
its validation, the distributed checks, the ablation's catalog, the method cards and the order
methods run in all come from here.

    >>> registered("mixup").stage, registered("mixup").task_names()
    ('step', ['image_classification'])
    >>> [method.name for method in methods_of("surgery")]
    ['alibi', 'blurpool', 'squeeze_excite', 'stochastic_depth', 'ghost_batchnorm', 'channels_last']
"""

from __future__ import annotations

import dataclasses
import keyword
from collections.abc import Callable
from dataclasses import dataclass

from fastcore_ops.data.transforms.registry import PLACES, augmentation as register_augmentation
from fastcore_ops.discovery import import_package_modules
from fastcore_ops.training.tasks.registry import all_tasks

# What a task's batches hold (its ``traits``), as methods for some tasks only require it.
IMAGES, TEXT = frozenset({"images"}), frozenset({"tokens"})

# Where a method acts, in the order a run meets them:
#   surgery     rewrites the model before training (fastcore_ops.apply_surgery, in ``order``);
#   model       sets up weights from the training data once the model is built (patch whitening);
#   optimizer   shapes the optimizer's parameter groups (a learning rate of their own for some parameters);
#   loader      the data loader's decoders and batch stage (fastcore_ops.data's augmentations);
#   loss        the task's loss function;
#   step        event hooks on the trainer's steps (a ``Method``, from the options' ``attach``);
#   evaluation  how the evaluation set is scored.
STAGES = ("surgery", "model", "optimizer", "loader", "loss", "step", "evaluation")
# The hook each stage's options class defines, through which the method takes effect (the surgeries
# and the loader's augmentations are the library's own options: apply_surgery and build_loader take
# them by the method's name).
HOOKS = {
    "model": "set_up_model",  # set_up_model(model, samples, **loader_settings) -> seconds it took
    "optimizer": "shape_groups",  # shape_groups(model, groups, lr=, decay_follows_lr=) -> groups
    "loss": "shape_loss",  # shape_loss(loss: fastcore_ops.training.losses.LossChoice) -> LossChoice
    "step": "attach",  # attach(config) -> Method, the event hooks for a run
    "evaluation": "probabilities",  # probabilities(model, images, logits) -> (N, classes), scored as top1_<name>
}


@dataclass(frozen=True)
class RegisteredMethod:
    """What one method declares about itself.

    options: its options dataclass; a run's ``methods.<name>`` is an instance of it, or None.
    order: its rank among the methods of its stage (lower first): surgeries apply in it, step
        methods receive each event in it. The loader's and the step's are places on the augmentations'
        one scale (``PLACES`` of fastcore_ops.data.transforms.registry).
    tasks: what a task's batches must hold (its ``traits``) for the method to apply; empty: any task.
    mixes_batch: it replaces each batch's targets by mixtures of samples; a run takes one such method.
    one_target_per_input: it needs a batch whose inputs and targets pair one to one (AugMix's
        consistency loss triples the inputs).
    leaves_parameters_unused: a training step may leave some parameters without a gradient
        (stochastic depth skips whole blocks), which DDP must be told.
    loader_switch: a keyword of :func:`fastcore_ops.data.build_loader` that is True while the
        method is on (channels_last batches for the channels_last surgery); None: none.
    try_with: the options the ablation adds it with (registered as the fields that differ from the
        options' defaults).
    check: ``check(options, config)`` raises a ValueError for options the rest of the run's
        configuration cannot take (the options check themselves in ``__post_init__``).
    module: where it is defined; its docstring holds the method card.
    """

    name: str
    options: type
    stage: str
    order: int
    tasks: frozenset[str]
    ddp: bool
    fsdp: bool
    mixes_batch: bool
    one_target_per_input: bool
    leaves_parameters_unused: bool
    loader_switch: str | None
    try_with: object
    check: Callable[[object, object], None] | None
    module: str

    def applies_to(self, task) -> bool:
        """Whether the method applies to ``task`` (a registered task class, :mod:`fastcore_ops.training.tasks`)."""
        return self.tasks <= task.traits

    def task_names(self) -> list[str]:
        """The registered tasks the method applies to, by name."""
        return [task.name for task in all_tasks() if self.applies_to(task)]

    def mismatch(self, task) -> str:
        """Why the method does not apply to ``task``, for an error message."""
        return f"{self.name} applies to task {', '.join(map(repr, self.task_names()))} only, and {task.name!r} is not one"


_REGISTRY: dict[str, RegisteredMethod] = {}
_LISTENERS: list[Callable[[RegisteredMethod], None]] = []


def on_registration(listener: Callable[[RegisteredMethod], None]) -> None:
    """Call ``listener(method)`` for each method registered from now on: a user's own, from a module that
    ``--import`` loads once the configuration's methods section exists (which adds the method's field)."""
    _LISTENERS.append(listener)


def register_method(name: str, *, stage: str, order: int, tasks: frozenset[str] = frozenset(), ddp: bool = True,
                    fsdp: bool = True, mixes_batch: bool = False, one_target_per_input: bool = False,
                    leaves_parameters_unused: bool = False, loader_switch: str | None = None,
                    try_with: dict | None = None,
                    check: Callable[[object, object], None] | None = None,
                    module: str | None = None, augmentation: bool = False) -> Callable[[type], type]:
    """Register the decorated options dataclass as the method ``name`` (see :class:`RegisteredMethod`).

    The options class defines its stage's hook (:data:`HOOKS`): a step method's
    ``attach(self, config) -> Method`` builds the event hooks for a run. A step method's order lies in
    ``PLACES["step"]``; ``augmentation``: it augments the batch's images, and is registered as the
    augmentation ``name`` (runs_in "step") too. As ``fastcore_ops/training/methods/mixup.py`` does::

        @register_method("mixup", stage="step", order=130, tasks=IMAGES, mixes_batch=True, augmentation=True)
        @dataclass(frozen=True)
        class MixUpOptions:
            alpha: float = 0.2
            def attach(self, config) -> Method: ...
    """
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise ValueError(f"a method's name must be a Python identifier (it is the configuration's field "
                         f"methods.<name>), got {name!r}")
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {', '.join(STAGES)}, got {stage!r}")
    if not isinstance(tasks, frozenset):
        raise TypeError(f"tasks must be a frozenset of what a task's batches hold (IMAGES, TEXT), got {tasks!r}")
    if augmentation and stage != "step":
        raise ValueError(f"method {name!r}: augmentation=True registers a step augmentation; the loader's register "
                         f"in fastcore_ops.data.transforms.registry, got stage {stage!r}")

    def register(options: type) -> type:
        if not dataclasses.is_dataclass(options):
            raise TypeError(f"method {name!r}: its options must be a dataclass, got {options!r}")
        hook = HOOKS.get(stage)
        if hook is not None and not callable(getattr(options, hook, None)):
            raise TypeError(f"method {name!r} runs in the {stage} stage: {options.__name__} needs its {hook} method "
                            f"(see fastcore_ops.training.methods.registry.HOOKS)")
        if stage == "step" and order not in PLACES["step"]:
            raise ValueError(f"method {name!r}: a step method's order must be in [{PLACES['step'].start}, "
                             f"{PLACES['step'].stop - 1}] (after the loader's places on the augmentations' one scale), "
                             f"got {order!r}")
        if name in _REGISTRY and _REGISTRY[name].options is not options:
            raise ValueError(f"method {name!r} is registered twice ({_REGISTRY[name].module} and "
                             f"{module or options.__module__}); give one of them another name")
        _REGISTRY[name] = RegisteredMethod(
            name=name, options=options, stage=stage, order=order, tasks=tasks, ddp=ddp, fsdp=fsdp,
            mixes_batch=mixes_batch, one_target_per_input=one_target_per_input,
            leaves_parameters_unused=leaves_parameters_unused, loader_switch=loader_switch,
            try_with=options(**(try_with or {})), check=check, module=module or options.__module__)
        if augmentation:
            register_augmentation(name, order=order, runs_in="step")(options)
        for listener in _LISTENERS:
            listener(_REGISTRY[name])
        return options

    return register


def registered(name: str) -> RegisteredMethod:
    """The method called ``name``, or a ValueError listing the methods there are."""
    import_package_modules("fastcore_ops.training.methods")
    if name not in _REGISTRY:
        raise ValueError(f"unknown method {name!r}; methods: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]


def all_methods() -> list[RegisteredMethod]:
    """Every registered method, by stage (in :data:`STAGES` order), then by order within it."""
    import_package_modules("fastcore_ops.training.methods")  # its modules register the methods as they load
    return sorted(_REGISTRY.values(), key=lambda method: (STAGES.index(method.stage), method.order, method.name))


def methods_of(stage: str) -> list[RegisteredMethod]:
    """The methods of ``stage``, in the order they run."""
    return [method for method in all_methods() if method.stage == stage]


def active(methods, stage: str | None = None) -> list[tuple[RegisteredMethod, object]]:
    """(method, its options) for each method a run's ``methods`` section turns on, in the order they run.

        >>> from fastcore_ops.training.config import MethodsConfig
        >>> from fastcore_ops.training.methods.mixup import MixUpOptions
        >>> [(method.name, options) for method, options in active(MethodsConfig(mixup=MixUpOptions(alpha=0.4)))]
        [('mixup', MixUpOptions(alpha=0.4))]
    """
    chosen = all_methods() if stage is None else methods_of(stage)
    return [(method, getattr(methods, method.name)) for method in chosen if getattr(methods, method.name) is not None]


def check_methods(methods, task, config) -> None:
    """Each method a run's ``methods`` section turns on: its options' type, its ``task``, and what it declares
    about the rest of the run's ``config`` (its ``check``); one batch mixing at a time. TypeError or ValueError
    names the method's field, as :func:`fastcore_ops.training.config.validate` (which calls this) does for every field.
    """
    for method in all_methods():
        options = getattr(methods, method.name)
        if options is not None and not isinstance(options, method.options):
            raise TypeError(f"methods.{method.name} must be None (off) or a {method.options.__name__}, got "
                            f"{type(options).__name__} {options!r}")
    chosen = active(methods)
    for method, options in chosen:
        if not method.applies_to(task):
            raise ValueError(f"methods.{method.mismatch(task)} (this run's task); set methods.{method.name}=None")
        if method.check is not None:
            try:
                method.check(options, config)
            except (TypeError, ValueError) as error:
                raise type(error)(f"methods.{method.name}: {error}") from None
    mixing = [method.name for method, _ in chosen if method.mixes_batch]
    if len(mixing) > 1:
        raise ValueError(f"methods.{mixing[1]} must be None when methods.{mixing[0]} is on (one batch mixing at a "
                         f"time)")


@dataclass(frozen=True)
class MethodPlan:
    """What a run's ``methods`` section asks of the rest of the run, read once as the run is built.

    hooks: the step methods' event hooks (``Method``), in their order.
    surgeries: (method, options) of the surgeries, in the order they rewrite the model.
    augmentations: every loader augmentation's options (None: off), each the keyword of
        :func:`fastcore_ops.data.build_loader` by the method's name.
    loader_switches: the build_loader keywords methods switch (``loader_switch``), each True while its
        method is on.
    leaves_parameters_unused: a step may leave some parameters without a gradient: stochastic
        depth's "block" mode skips a dropped block whole (its speed-up), so DDP must look for
        unused parameters after each forward pass (a walk of the autograd graph, small next to
        the step). Ranks seed alike, so they drop the same blocks, and DDP leaves the gradients
        of parameters unused on every rank None, as one process does (torch 2.14 on gloo).
    """

    hooks: list
    surgeries: list[tuple[RegisteredMethod, object]]
    augmentations: dict[str, object]
    loader_switches: dict[str, bool]
    leaves_parameters_unused: bool


def plan_methods(config) -> MethodPlan:
    """The :class:`MethodPlan` of a run's configuration (its step methods attached to it).

        >>> from fastcore_ops.training.recipes import get_recipe
        >>> plan = plan_methods(get_recipe("cifar_hot"))
        >>> [method.name for method, _ in plan.surgeries], plan.leaves_parameters_unused
        (['blurpool', 'stochastic_depth', 'channels_last'], True)
        >>> plan_methods(get_recipe("cifar_medium")).hooks
        [MixUp(seed=0, alpha=0.2), SAM(rho=0.05, interval=10), EMA(half_life_steps=250, decay=0.9972312513520695)]
    """
    chosen = active(config.methods)
    augmentations = {method.name: getattr(config.methods, method.name) for method in methods_of("loader")}
    return MethodPlan(hooks=[options.attach(config) for method, options in chosen if method.stage == "step"],
                      surgeries=[(method, options) for method, options in chosen if method.stage == "surgery"],
                      augmentations=augmentations,
                      loader_switches={method.loader_switch: getattr(config.methods, method.name) is not None
                                       for method in all_methods() if method.loader_switch},
                      leaves_parameters_unused=any(method.leaves_parameters_unused for method, _ in chosen))
