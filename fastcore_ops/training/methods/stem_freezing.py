"""Stem freezing: stop training the model's first convolution after its first epochs.

Method card
    What: once ``epochs`` epochs of the run are trained, the stem (the model's first ``Conv2d``
        reading the 3 image channels, as ``patch_whitening`` finds it) is frozen: its weights and
        bias get no gradient and leave the optimizer and its state. Behind a stem that is all
        frozen nothing before the first block trains, so backpropagation stops at the first
        block's convolution, which no longer computes the gradient of its input, and the stem's
        activation no longer computes its own.
    When it helps: with ``patch_whitening``, whose frozen filters leave only the stem's bias to
        train, which its first epochs settle: airbench94 and airbench94_muon train it for the first
        3 epochs and then freeze it. A run shorter than ``epochs`` never freezes it.
    Cost: each frozen step skips the first block's input gradient, the largest activation's; and
        accuracy where the bias has not settled. In ``cifar_record_muon`` (``reports/cifar-stem-freezing-20261203/``)
        the frozen epochs' backward took 3% less, their time no less, and seed 3 ended 0.29 points lower with TTA;
        so no recipe uses it.
    Options (``StemFreezingOptions``): ``epochs`` (3.0, may be fractional; 0 freezes the stem
        before the first step).
    Composition: after patch whitening, which sets the stem. ``lookahead`` still pulls a frozen
        bias toward its slow copy, as airbench94's does. Under DistributedDataParallel the run
        looks for parameters without a gradient every step (``find_unused_parameters``); not for
        FSDP, whose shards are fixed when it wraps the model. On resume ``on_fit_start`` refreezes
        from ``state.progress``.

    >>> StemFreezingOptions(epochs=3.0).attach_at(run_epochs=8.0).frozen_from
    0.375
"""

from __future__ import annotations

from dataclasses import dataclass

from fastcore_ops.checks import check_number
from fastcore_ops.training.methods.base import Method, TrainState
from fastcore_ops.training.methods.layer_freezing import freeze_parameters
from fastcore_ops.training.methods.patch_whitening import find_stem
from fastcore_ops.training.methods.registry import IMAGES, register_method


# Before layer freezing (160), which may freeze the stem too, and the averages. Under DDP the frozen stem is a
# parameter without a gradient, which DDP must be told of; FSDP's shards are fixed when it wraps the model.
@register_method("stem_freezing", stage="step", order=158, tasks=IMAGES, fsdp=False, leaves_parameters_unused=True)
@dataclass(frozen=True)
class StemFreezingOptions:
    """How many epochs the stem trains before it is frozen; ``methods.stem_freezing``.

        >>> StemFreezingOptions(epochs=-1)
        Traceback (most recent call last):
        ...
        ValueError: epochs must be a number >= 0, got -1
    """

    epochs: float = 3.0  # airbench94's whiten_bias_epochs

    def __post_init__(self) -> None:
        check_number("epochs", self.epochs, low=0)

    def attach(self, config) -> Method:
        return self.attach_at(config.schedule.epochs)

    def attach_at(self, run_epochs: float) -> StemFreezing:
        """The hooks for a run of ``run_epochs`` epochs (after the scale schedule)."""
        check_number("run_epochs", run_epochs, low=0, low_open=True)
        return StemFreezing(frozen_from=min(1.0, self.epochs / run_epochs))


class StemFreezing(Method):
    """Freezes the stem for every step from ``frozen_from`` of the run on (a fraction; 1: never).

    >>> method = StemFreezing(frozen_from=0.375)
    >>> method.cost_state(step=74, progress=0.37), method.cost_state(step=75, progress=0.375)
    (None, 'stem frozen')
    """

    def __init__(self, frozen_from: float):
        self.frozen_from = check_number("frozen_from", frozen_from, low=0, high=1)

    def frozen_at(self, progress: float) -> bool:
        """Whether a step that starts at ``progress`` of the run trains with the stem frozen."""
        return self.frozen_from < 1 and progress >= self.frozen_from

    def cost_state(self, step: int, progress: float) -> str | None:
        return "stem frozen" if self.frozen_at(progress) else None

    def on_fit_start(self, state: TrainState) -> None:
        self._freeze_when_due(state)

    def on_step_end(self, state: TrainState) -> None:
        self._freeze_when_due(state)

    def _freeze_when_due(self, state: TrainState) -> None:
        if self.frozen_at(state.progress):
            freeze_parameters(state.optimizer, list(find_stem(state.model, "stem_freezing").parameters()))
