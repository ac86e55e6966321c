"""EMA: evaluate an exponential moving average of the weights instead of the latest weights.

Method card
    What: after every optimizer step, ``w_ema = d * w_ema + (1 - d) * w`` for every parameter and
        buffer (BatchNorm statistics included), with ``d = 0.5 ** (1 / half_life_steps)``, starting
        from the weights at the start of the run; evaluation then runs the averaged model.
    When it helps: noisy optimization (small batches, high learning rates, short schedules that
        end before the learning rate is small): the average sits nearer the basin's centre.
        With a schedule that already decays to ~0 the gain is small.
    Hyperparameters: ``half_life_steps`` (> 0): after this many steps a weight's contribution
        has halved; about 1-5% of the run's steps is typical. Costs one model copy of memory
        and a fused lerp per step.
    Composition: created in ``on_fit_start``, after model surgery, so it averages the operated
        model. Works with SAM, frozen layers (their weights just stop moving) and MixUp/CutMix;
        with SWA the last method to set ``state.eval_model`` decides what is evaluated, so use one.
    In any training loop: ``AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(decay),
        use_buffers=True)`` of ``torch.optim.swa_utils``, with ``decay = 0.5 ** (1 / half_life_steps)``,
        updated after each step; this method is that, checkpointed and started at the first weights.

    >>> method = EMA(half_life_steps=500)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

from fastcore_ops.checks import check_int
from fastcore_ops.training.methods.base import Method, TrainState, averaged_module_weights
from fastcore_ops.training.methods.registry import register_method


# A whole copy of the weights, which FSDP shards away.
@register_method("ema", stage="step", order=170, fsdp=False, try_with={"half_life_steps": 25})
@dataclass(frozen=True)
class EMAOptions:
    """The average's half-life, in optimizer steps; ``methods.ema``."""

    half_life_steps: int = 500  # about 1-5% of a run's steps is typical

    def __post_init__(self) -> None:
        check_int("half_life_steps", self.half_life_steps, low=1)

    def attach(self, config) -> Method:
        return EMA(self.half_life_steps)


class EMA(Method):
    """Keeps an exponential moving average of ``state.model`` and makes it ``state.eval_model``.

    >>> method = EMA(half_life_steps=100)
    >>> round(method.decay, 5)
    0.99309
    """

    def __init__(self, half_life_steps: int):
        check_int("half_life_steps", half_life_steps, low=1)  # as EMAOptions: whole steps
        self.half_life_steps = half_life_steps
        self.decay = 0.5 ** (1.0 / half_life_steps)
        self._averaged: AveragedModel | None = None
        self._pending_state: dict[str, Any] | None = None

    def on_fit_start(self, state: TrainState) -> None:
        self._averaged = AveragedModel(
            state.model, multi_avg_fn=get_ema_multi_avg_fn(self.decay), use_buffers=True
        )
        self._averaged.requires_grad_(False)
        # AveragedModel's first update copies the weights; doing it now makes the run's first
        # step a real EMA step, so the average starts from the initial weights.
        self._averaged.update_parameters(state.model)
        if self._pending_state is not None:
            self._averaged.load_state_dict(self._pending_state)
            self._pending_state = None
        state.eval_model = self._averaged.module

    def on_step_end(self, state: TrainState) -> None:
        self._averaged.update_parameters(state.model)

    @property
    def averaged_model(self) -> torch.nn.Module | None:
        """The averaged module (None before the run starts)."""
        return None if self._averaged is None else self._averaged.module

    def state_dict(self) -> dict[str, Any]:
        return {} if self._averaged is None else {"averaged_model": self._averaged.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if set(state) != {"averaged_model"}:
            raise ValueError(f"EMA state must have the key 'averaged_model', got {sorted(state)}")
        if self._averaged is None:
            # Loaded before the run started: applied once on_fit_start has built the average.
            self._pending_state = state["averaged_model"]
        else:
            self._averaged.load_state_dict(state["averaged_model"])

    def evaluated_weights(self, saved: dict[str, Any], finished: bool) -> dict[str, Any] | None:
        # The average is the evaluation model from the run's start on (on_fit_start), so at every checkpoint.
        return averaged_module_weights(saved.get("averaged_model")) if saved else None
