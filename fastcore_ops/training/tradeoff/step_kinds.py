"""What a run's steps are, kind by kind: the cost pass times each kind once and prices every run from its counts.

Two steps cost the same when they compute the same thing on the same machine: the same setup (the
configuration less seed and budget: model, batch, precision, methods), the same image size
(progressive resizing changes it), and the same per-step work of every method (SAM's second pass
on every n-th step, selective backprop's window, the share of frozen layers: each method's
:meth:`~fastcore_ops.training.methods.base.Method.cost_state`). A run's plan counts its steps of each kind,
found by walking its schedule, not by training it.

The data adds one more thing that changes along a run: the decoding workers keep the crops they
made (:mod:`fastcore_ops.data.backends.workers.crop_cache`), so a step whose images were decoded before copies
them instead. Each worker keeps its own, and an epoch hands batch ``b`` to worker ``b mod w``
after a fresh shuffle, so an image met ``p`` times before at this size is in its worker's cache
with probability ``1 - (1 - 1/w)^p``. The plan sums, per kind, the share of images decoded
afresh (``decodes``); the cost pass times each kind both with every image decoded and with every
image kept, and the model mixes the two by that share.

    >>> plan = plan_run(trainer, setup="5dd3dad415ab")  # doctest: +SKIP
    >>> {kind.describe(): round(steps) for kind, steps in plan.steps.items()}  # doctest: +SKIP
    {'16 px': 2184, '20 px': 546, ...}
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

# The most steps a plan walks, one by one: some ten times the longest run of the recipes here, ResNet-50's 90 epochs
# of ImageNet at batch 256 on one process (about 450,000 steps) at budget 2. A run said to be longer (its config.json's
# epochs and its results.json's steps come from elsewhere) is refused rather than walked.
MAX_PLANNED_STEPS = 10_000_000


@dataclass(frozen=True, order=True)
class StepKind:
    """One kind of training step: its setup's hash, its image size (None: no image), what its methods do.

        >>> StepKind("5dd3dad415ab", 16, ("sam second pass",)).describe()
        '16 px, sam second pass'
    """

    setup: str
    image_size: int | None
    methods: tuple[str, ...] = ()

    def describe(self) -> str:
        """The kind in a few words, its setup left out."""
        parts = ([f"{self.image_size} px"] if self.image_size is not None else []) + list(self.methods)
        return ", ".join(parts) or "every step alike"


@dataclass(frozen=True)
class RunPlan:
    """A run's steps by kind, and the starts the cost pass prices apart.

    steps: the number of steps of each kind. decodes: of those, how many steps' worth of images are
    decoded afresh rather than copied from a worker's crop cache (see the module's docstring).
    sizes: the image sizes the run trains at, in order (each one's first steps pay for new kernels
    and a filling pipeline). epochs: the epochs the run starts. first_steps: where each kind first
    occurs. steps_per_epoch, total_steps: the run's shape.
    """

    steps: dict[StepKind, int]
    decodes: dict[StepKind, float]
    sizes: tuple[int | None, ...]
    epochs: int
    first_steps: dict[StepKind, int]
    steps_per_epoch: int
    total_steps: int


def decode_share(workers: int, passes: int) -> float:
    """The expected share of a batch's images its worker has not kept, for images met ``passes`` times before.

        >>> decode_share(2, 0), decode_share(2, 1), decode_share(2, 3), decode_share(1, 1), decode_share(0, 2)
        (1.0, 0.5, 0.125, 0.0, 0.0)
    """
    return (1.0 - 1.0 / max(workers, 1)) ** passes


def check_planned_steps(total_steps: int, where: str = "the run") -> int:
    """``total_steps`` if a plan may walk them: an int in [1, :data:`MAX_PLANNED_STEPS`]; ValueError otherwise.

        >>> check_planned_steps(10**300)
        Traceback (most recent call last):
        ...
        ValueError: the run would train about 2**996 steps, more than the 10000000 a cost plan walks; ...
    """
    if isinstance(total_steps, bool) or not isinstance(total_steps, int) or total_steps < 1:
        raise ValueError(f"{where} would train {total_steps!r} steps; a plan needs a whole number of steps >= 1")
    if total_steps > MAX_PLANNED_STEPS:
        count = str(total_steps) if total_steps.bit_length() <= 64 else f"about 2**{total_steps.bit_length() - 1}"
        raise ValueError(f"{where} would train {count} steps, more than the {MAX_PLANNED_STEPS} a cost plan walks; "
                         f"its configuration (schedule.epochs, scale_schedule_ratio) or record is not a real run's")
    return total_steps


def kind_function(trainer, setup: str) -> Callable[[int], StepKind]:
    """The kind of each step of ``trainer``'s run, as a function of the step's index."""
    state, loader = trainer.state, trainer.train_loader
    size_at = getattr(loader, "image_size_at", None)
    fixed_size = getattr(loader, "image_size", None)

    def kind_at(step: int) -> StepKind:
        epoch, batch = divmod(step, state.steps_per_epoch)
        size = (size_at(epoch, batch) if size_at is not None else None) or fixed_size
        progress = min(1.0, step / state.total_steps)
        states = tuple(filter(None, (method.cost_state(step, progress) for method in trainer.methods)))
        return StepKind(setup, size, states)

    return kind_at


def step_shares(trainer, setup: str, workers: int | None = None) -> Iterator[tuple[StepKind, float]]:
    """Each step of the run ``trainer`` would train, in order: its kind and the share of its images decoded
    afresh rather than copied from a worker's crop cache (see the module's docstring). ``workers``: the
    decoding workers to plan with (the cost pass's, where it recorded them); default the trainer's own.
    ValueError for a run longer than :data:`MAX_PLANNED_STEPS` (:func:`check_planned_steps`), before any step."""
    state = trainer.state
    check_planned_steps(state.total_steps)
    if workers is None:
        workers = getattr(trainer.train_loader, "decoding_workers", 0)
    kind_at = kind_function(trainer, setup)
    at_size: Counter[int | None] = Counter()  # steps trained so far at each image size
    for step in range(state.total_steps):
        kind = kind_at(step)
        yield kind, decode_share(workers, at_size[kind.image_size] // state.steps_per_epoch)
        at_size[kind.image_size] += 1


def plan_run(trainer, setup: str, workers: int | None = None) -> RunPlan:
    """Every step of the run ``trainer`` would train, counted by kind (nothing is trained); ``workers`` as in
    :func:`step_shares` (ValueError for a run longer than :data:`MAX_PLANNED_STEPS`, before any step)."""
    per_epoch, total = trainer.state.steps_per_epoch, check_planned_steps(trainer.state.total_steps)
    steps: Counter[StepKind] = Counter()
    decodes: dict[StepKind, float] = {}
    first_steps: dict[StepKind, int] = {}
    for step, (kind, share) in enumerate(step_shares(trainer, setup, workers)):
        steps[kind] += 1
        first_steps.setdefault(kind, step)
        decodes[kind] = decodes.get(kind, 0.0) + share
    sizes = tuple(dict.fromkeys(kind.image_size for kind in first_steps))  # kinds in the order they first train
    return RunPlan(steps=dict(steps), decodes=decodes, sizes=sizes, epochs=math.ceil(total / per_epoch),
                   first_steps=first_steps, steps_per_epoch=per_epoch, total_steps=total)
