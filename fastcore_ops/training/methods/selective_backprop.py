"""Selective backprop: score the whole batch without gradients, train only on its hardest samples.

Method card
    What: on the steps it is active, a forward pass without gradients scores every sample of the
        batch by its loss; only the ``keep`` fraction with the highest losses is then trained on
        (forward, backward and optimizer step as usual), so the backward pass, the costliest
        phase, handles fewer samples (Jiang et al., 2019, "Accelerating deep learning by
        focusing on the biggest losers").
    When it helps: the middle and late part of a run, when most samples are already learned
        and contribute little gradient. Active from ``start`` to ``end`` (fractions of the run),
        and every ``interrupt``-th step in between trains on the whole batch.
    Cost: the scoring pass (about a third of a step without gradients, less with
        ``scale_factor`` < 1, which scores the images at that fraction of their size); it saves
        ``1 - keep`` of forward and backward on active steps.
    Hyperparameters: ``keep`` 0.5, ``start`` 0.5, ``end`` 0.9, ``interrupt`` 2, ``scale_factor`` 1.0.
    Composition: runs after the batch augmentations and MixUp/CutMix (it ranks the mixed
        samples by the loss they train with), so list it after them; the scoring pass leaves
        BatchNorm's running statistics untouched, runs under the run's precision (AMP), and on
        each process's own share of the batch under DDP (every process keeps the same count).
        EMA, SAM and SWA see the selected batch like any other.

    >>> method = SelectiveBackprop(SelectiveBackpropOptions(keep=0.5, start=0.5, end=0.9))
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch.nn import functional as F

from fastcore_ops.checks import check_int, check_number
from fastcore_ops.training.methods.base import Method, TrainState
from fastcore_ops.training.methods.registry import IMAGES, register_method
from fastcore_ops.training.tasks.registry import task_named


def _check_scale_factor(options: SelectiveBackpropOptions, config) -> None:
    if not IMAGES <= task_named(config.task).traits and options.scale_factor != 1.0:
        raise ValueError(f"methods.selective_backprop.scale_factor resizes images; task {config.task!r} trains on "
                         f"other batches: set it to 1.0, got {options.scale_factor}")


# Last of the step methods: it ranks the batch every other method has shaped (masked, mixed,
# shortened); it trains on a selection of the inputs, each with its own target.
@register_method("selective_backprop", stage="step", order=200, one_target_per_input=True,
                 check=_check_scale_factor)
@dataclass(frozen=True)
class SelectiveBackpropOptions:
    """Which share of the batch trains, and when.

        >>> SelectiveBackpropOptions(start=0.9, end=0.5)
        Traceback (most recent call last):
        ...
        ValueError: end must be in (start=0.9, 1], got 0.5
    """

    keep: float = 0.5  # fraction of each batch trained on, the highest losses
    start: float = 0.5  # fractions of the run
    end: float = 0.9
    interrupt: int = 2  # every interrupt-th active step trains on the whole batch; 0 = never
    scale_factor: float = 1.0  # images: score them resized by this factor (cheaper); 1 = as they are

    def __post_init__(self) -> None:
        check_number("keep", self.keep, low=0, high=1, low_open=True)
        check_number("start", self.start, low=0, high=1, high_open=True)
        check_number("end", self.end, low=0, high=1)
        if self.end <= self.start:
            raise ValueError(f"end must be in (start={self.start}, 1], got {self.end}")
        check_int("interrupt", self.interrupt, low=0)
        check_number("scale_factor", self.scale_factor, low=0, high=1, low_open=True)

    def attach(self, config) -> Method:
        return SelectiveBackprop(self)


@contextlib.contextmanager
def frozen_running_statistics(model: torch.nn.Module) -> Iterator[None]:
    """Restore, on leaving, the running statistics of every normalization layer that keeps them.

    A training-mode forward pass updates BatchNorm's running mean and variance; a pass that only
    scores samples must not count as one more batch seen.

        >>> model = torch.nn.BatchNorm1d(3)
        >>> with frozen_running_statistics(model):
        ...     _ = model(torch.randn(8, 3) + 5)
        >>> float(model.running_mean.abs().max())
        0.0
    """
    tracking = [module for module in model.modules() if getattr(module, "track_running_stats", False)]
    saved = [{name: buffer.clone() for name, buffer in module.named_buffers(recurse=False)} for module in tracking]
    try:
        yield
    finally:
        for module, buffers in zip(tracking, saved):
            for name, value in buffers.items():
                getattr(module, name).copy_(value)


def hardest(losses: torch.Tensor, keep: float) -> torch.Tensor:
    """The indices, in batch order, of the ``keep`` fraction (at least one) of samples with the highest losses.

        >>> hardest(torch.tensor([0.1, 2.0, 0.5, 3.0]), keep=0.5).tolist()
        [1, 3]
    """
    count = max(1, round(keep * losses.numel()))
    return losses.topk(count).indices.sort().values


class SelectiveBackprop(Method):
    """Trains on the hardest ``keep`` of each batch while active (see the module's card).

    >>> method = SelectiveBackprop(SelectiveBackpropOptions(keep=0.25, interrupt=0))
    """

    def __init__(self, options: SelectiveBackpropOptions = SelectiveBackpropOptions()):
        if not isinstance(options, SelectiveBackpropOptions):
            raise TypeError(f"options must be a SelectiveBackpropOptions, got {type(options).__name__}")
        self.options = options

    def active(self, state: TrainState) -> bool:
        """Whether the step about to run trains on a selection."""
        return self.active_at(state.step, state.progress)

    def active_at(self, step: int, progress: float) -> bool:
        """Whether step ``step``, at ``progress`` of the run, trains on a selection."""
        options = self.options
        in_interval = options.start <= progress < options.end
        return in_interval and (options.interrupt == 0 or (step + 1) % options.interrupt != 0)

    def cost_state(self, step: int, progress: float) -> str | None:
        return f"selective backprop keeps {self.options.keep:g}" if self.active_at(step, progress) else None

    def on_after_dataloader(self, state: TrainState) -> None:
        if not self.active(state):
            return
        inputs, targets = state.inputs, state.targets
        scored = inputs
        if self.options.scale_factor != 1.0:
            if inputs.ndim != 4:
                raise ValueError(f"selective backprop's scale_factor resizes (N, C, H, W) images, got inputs of "
                                 f"shape {tuple(inputs.shape)}; set scale_factor=1.0")
            scored = F.interpolate(inputs, scale_factor=self.options.scale_factor, mode="bilinear",
                                   align_corners=False, antialias=True)
        with frozen_running_statistics(state.model):
            losses = state.score_samples(scored, targets)
        chosen = hardest(losses, self.options.keep)
        state.inputs, state.targets = inputs[chosen], targets[chosen]
