"""The events a training run fires, the state methods see, and the base class of every method.

A method is a small class that attaches to a few events and changes the run through
:class:`TrainState`: MixUp rewrites the batch after the dataloader, SAM adds a second pass after
backward, EMA updates its average at the end of each step. The trainer fires the events in this
order::

    FIT_START
    for each epoch:  EPOCH_START
        for each batch:  AFTER_DATALOADER, (forward) BEFORE_LOSS, (loss) AFTER_LOSS,
                         (backward) AFTER_BACKWARD, (optimizer step) STEP_END
        EPOCH_END
    FIT_END

Example:
    >>> class CountSteps(Method):
    ...     def __init__(self):
    ...         self.steps = 0
    ...     def on_step_end(self, state):
    ...         self.steps += 1
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from fastcore_ops.checks import check_int


class Event(enum.Enum):
    FIT_START = "fit_start"
    EPOCH_START = "epoch_start"
    AFTER_DATALOADER = "after_dataloader"
    BEFORE_LOSS = "before_loss"
    AFTER_LOSS = "after_loss"
    AFTER_BACKWARD = "after_backward"
    STEP_END = "step_end"
    EPOCH_END = "epoch_end"
    FIT_END = "fit_end"


@dataclass
class TrainState:
    """Everything a method may read or change; owned by the trainer.

    inputs, targets: the current batch after the dataloader. For image classification, images
        and int64 class indices (N,) or, once a method mixes samples, float class probabilities
        (N, C); for language modelling, int64 token ids (N, T) and the next tokens (N, T).
    num_classes: the classes of a classification's targets; 0 for other tasks.
    outputs, loss: the forward pass's logits and the (unscaled) loss of the current step.
    step: optimizer steps taken so far in the whole run; ``total_steps`` the run's length.
    forward_backward: recomputes the loss on the current batch at the current weights and
        backpropagates it (through the grad scaler under fp16), for methods that need a second
        pass (SAM); returns the loss.
    score_samples: each sample's loss, (N,), for given inputs and targets at the current weights,
        without gradients, under the run's precision (selective backprop); a training-mode pass.
    """

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    device: torch.device
    num_classes: int
    steps_per_epoch: int
    total_steps: int
    epoch: int = 0
    step: int = 0
    inputs: torch.Tensor | None = None
    targets: torch.Tensor | None = None
    outputs: torch.Tensor | None = None
    loss: torch.Tensor | None = None
    forward_backward: Callable[[], torch.Tensor] | None = None
    score_samples: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None
    # Iterable of this epoch's (inputs, targets) batches on the device (SWA recomputes BatchNorm with it).
    train_loader: Any = None
    # The module evaluation runs (EMA and SWA put their averaged model here); None: ``model``.
    eval_model: torch.nn.Module | None = None
    # Wall-clock seconds of method work outside the forward/backward/step, keyed by method name.
    method_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def progress(self) -> float:
        """Fraction of training done, in [0, 1]."""
        return min(1.0, self.step / self.total_steps)


class Method:
    """Base class: override the ``on_<event>`` hooks the method needs; the rest do nothing.

    A method with state that must survive a restart (EMA weights, SWA's average, ...) also
    overrides ``state_dict`` and ``load_state_dict``. Structural changes (frozen layers) must be
    a function of ``state.step`` and be redone in ``on_fit_start``, which also runs on resume.
    """

    def run(self, event: Event, state: TrainState) -> None:
        getattr(self, f"on_{event.value}")(state)

    def on_fit_start(self, state: TrainState) -> None: ...
    def on_epoch_start(self, state: TrainState) -> None: ...
    def on_after_dataloader(self, state: TrainState) -> None: ...
    def on_before_loss(self, state: TrainState) -> None: ...
    def on_after_loss(self, state: TrainState) -> None: ...
    def on_after_backward(self, state: TrainState) -> None: ...
    def on_step_end(self, state: TrainState) -> None: ...
    def on_epoch_end(self, state: TrainState) -> None: ...
    def on_fit_end(self, state: TrainState) -> None: ...

    def cost_state(self, step: int, progress: float) -> str | None:
        """What this method does at step ``step`` (``progress`` of the run done) that changes the step's cost,
        in a few words ("second pass"); None when its work is the same at every step.

        The tradeoff tool's cost pass (:mod:`fastcore_ops.training.tradeoff.step_kinds`) times each kind of step
        once: two steps whose methods all give the same answer here cost the same.
        """
        return None

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            raise ValueError(f"{type(self).__name__} keeps no state, but the checkpoint has {sorted(state)}")

    def evaluated_weights(self, saved: dict[str, Any], finished: bool) -> dict[str, Any] | None:
        """The weights of the model this method had the run evaluate (``state.eval_model``), from its checkpointed
        ``saved`` state (``finished``: the run's last checkpoint); None where it left evaluation to the model.

        What ``python -m fastcore_ops.training.export`` writes. Where several methods give weights, the last in the run's order
        wins, as the last to set ``state.eval_model`` does (EMA from the start, SWA at the end).
        """
        return None

    def __repr__(self) -> str:
        options = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({options})"


def averaged_module_weights(averaged: object) -> dict[str, Any]:
    """The weights of the module that a saved ``torch.optim.swa_utils.AveragedModel`` state dict averages: its
    ``module.`` entries, without that prefix (its ``n_averaged`` count left out).

        >>> averaged_module_weights({"module.weight": torch.ones(1), "n_averaged": torch.tensor(3)})
        {'weight': tensor([1.])}
    """
    if not isinstance(averaged, dict):
        raise ValueError(f"an averaged model's state must be a dict of its weights, got {type(averaged).__name__}")
    return {key.removeprefix("module."): value for key, value in averaged.items()
            if isinstance(key, str) and key.startswith("module.")}


class SeededMethod(Method):
    """A method that draws from its own seeded CPU generator, checkpointed so a resumed run draws
    exactly what the uninterrupted run would have (MixUp, CutMix, Cutout, AugMix).

        >>> class Noise(SeededMethod):
        ...     def on_after_dataloader(self, state):
        ...         state.inputs = state.inputs + torch.randn(state.inputs.shape, generator=self._generator)
    """

    def __init__(self, seed: int = 0):
        self.seed = check_int("seed", seed, low=0)
        self._generator = torch.Generator().manual_seed(seed)

    def state_dict(self) -> dict[str, Any]:
        return {"generator": self._generator.get_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if set(state) != {"generator"}:
            raise ValueError(f"{type(self).__name__} state must have the key 'generator', got {sorted(state)}")
        self._generator.set_state(state["generator"])
