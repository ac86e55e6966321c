"""Lookahead: every few steps, pull the trained weights back toward a slow copy of them.

Method card
    What: a slow copy of every floating-point weight and buffer (BatchNorm statistics included)
        starts as the initial weights. Every ``every_steps`` optimizer steps the slow copy moves
        toward the weights, ``slow = d * slow + (1 - d) * w``, and the weights are set to it,
        ``w = slow``; at the end of the run the weights become the slow copy. The pull ``d``
        grows with the run, ``d = max_pull * progress ** ramp_power``: early steps move freely,
        late ones are averaged (the schedule of Jordan's airbench94, arXiv 2404.00498).
    When it helps: short runs that end at a high learning rate (airbench94 ends at 7% of its
        peak): the average of the last steps sits nearer the basin's centre than any of them.
        ``ema`` averages too, but never writes the average back, so training goes on from the
        noisy weights; here every step after a pull starts from the average.
    Hyperparameters: ``every_steps`` (5), ``max_pull`` (0.95 ** 5 = 0.774, airbench's: a 0.95 EMA
        over the 5 steps), ``ramp_power`` (3). Costs one model copy of memory and two fused
        passes over the weights every ``every_steps`` steps.
    Composition: created in ``on_fit_start``, after model surgery and patch whitening, so it
        averages the operated model; frozen weights (a frozen whitening stem) stay as they are.
        With ``ema`` or ``swa`` those average the pulled weights.

    >>> method = Lookahead(every_steps=5, max_pull=0.95 ** 5, ramp_power=3.0)
    >>> round(method.pull(step=50, total_steps=100), 4)
    0.0967
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from fastcore_ops.checks import check_int, check_number
from fastcore_ops.training.methods.base import Method, TrainState
from fastcore_ops.training.methods.registry import register_method


def _float_tensors(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The model's floating-point weights and buffers by name (the integer batch counts left out)."""
    return {name: tensor for name, tensor in model.state_dict(keep_vars=True).items() if tensor.is_floating_point()}


@torch.no_grad()
def lookahead_pull_(slow: dict[str, torch.Tensor], model: torch.nn.Module, pull: float) -> None:
    """Move ``slow`` toward ``model``'s weights by ``1 - pull``, then set the weights to ``slow``, in place.

        >>> model = torch.nn.Linear(1, 1, bias=False)
        >>> _ = model.weight.data.fill_(1.0)
        >>> slow = {"weight": torch.zeros(1, 1)}
        >>> lookahead_pull_(slow, model, pull=0.75)
        >>> model.weight.item(), slow["weight"].item()
        (0.25, 0.25)
    """
    fast = _float_tensors(model)
    for name, tensor in slow.items():
        tensor.lerp_(fast[name].detach(), 1.0 - pull)
        fast[name].detach().copy_(tensor)


# After layer freezing (160) and before the averages (EMA 170, SWA 180), which then average pulled weights; a whole
# copy of the weights, which FSDP shards away.
@register_method("lookahead", stage="step", order=165, fsdp=False)
@dataclass(frozen=True)
class LookaheadOptions:
    """How often the weights are pulled back to the slow copy, and how hard; ``methods.lookahead``.

        >>> LookaheadOptions(max_pull=1.0)
        Traceback (most recent call last):
        ...
        ValueError: max_pull must be a number in [0, 1), got 1.0
    """

    every_steps: int = 5
    max_pull: float = 0.95 ** 5  # airbench94's: a decay of 0.95 per step over its 5 steps
    ramp_power: float = 3.0

    def __post_init__(self) -> None:
        check_int("every_steps", self.every_steps, low=1)
        check_number("max_pull", self.max_pull, low=0, high=1, high_open=True)
        check_number("ramp_power", self.ramp_power, low=0)

    def attach(self, config) -> Method:
        return Lookahead(self.every_steps, self.max_pull, self.ramp_power)


class Lookahead(Method):
    """Keeps the slow copy, pulls ``state.model`` back to it every ``every_steps`` steps and at the run's end."""

    def __init__(self, every_steps: int, max_pull: float, ramp_power: float):
        self.every_steps = check_int("every_steps", every_steps, low=1)
        self.max_pull = check_number("max_pull", max_pull, low=0, high=1, high_open=True)
        self.ramp_power = check_number("ramp_power", ramp_power, low=0)
        self._slow: dict[str, torch.Tensor] | None = None
        self._pending_state: dict[str, torch.Tensor] | None = None

    def pull(self, step: int, total_steps: int) -> float:
        """The share of the slow copy in the pull at optimizer step ``step`` of ``total_steps``."""
        return self.max_pull * min(1.0, step / total_steps) ** self.ramp_power

    def cost_state(self, step: int, progress: float) -> str | None:
        # Step ``step`` (counted from 0) ends with the run's ``step + 1``-th optimizer step, whose end may pull.
        return "lookahead pull" if (step + 1) % self.every_steps == 0 else None

    def on_fit_start(self, state: TrainState) -> None:
        self._slow = {name: tensor.detach().clone() for name, tensor in _float_tensors(state.model).items()}
        if self._pending_state is not None:
            self.load_state_dict({"slow": self._pending_state})
            self._pending_state = None

    def on_step_end(self, state: TrainState) -> None:
        if state.step % self.every_steps == 0:
            lookahead_pull_(self._slow, state.model, self.pull(state.step, state.total_steps))

    def on_fit_end(self, state: TrainState) -> None:
        # A pull of 1: the slow copy unchanged, the weights set to it (airbench94's last update).
        lookahead_pull_(self._slow, state.model, 1.0)

    def state_dict(self) -> dict[str, Any]:
        return {} if self._slow is None else {"slow": {name: tensor.clone() for name, tensor in self._slow.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if set(state) != {"slow"}:
            raise ValueError(f"Lookahead state must have the key 'slow', got {sorted(state)}")
        if self._slow is None:
            self._pending_state = state["slow"]  # applied once on_fit_start has the model
            return
        if set(state["slow"]) != set(self._slow):
            raise ValueError(f"Lookahead's saved slow copy holds {sorted(state['slow'])}, the model "
                             f"{sorted(self._slow)}")
        for name, tensor in self._slow.items():
            tensor.copy_(state["slow"][name])
