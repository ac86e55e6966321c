"""SAM: step with the gradient taken at the worst nearby weights, to prefer flat minima.

Method card
    What: after backward, move the weights to ``w + rho * g / ||g||`` (``g`` the batch gradient,
        the norm over all trained parameters), recompute the loss and its gradient there, move
        the weights back, and let the optimizer step with that second gradient
        (Foret et al., 2021).
    When it helps: longer runs where generalization, not optimization speed, limits accuracy;
        it usually gains accuracy per epoch but each SAM step costs a second forward and
        backward pass. ``interval`` > 1 does the second pass on only every interval-th step,
        trading part of the gain for speed.
    Hyperparameters: ``rho`` (> 0), the radius of the neighbourhood: 0.05 is typical for
        ImageNet-scale SGD, larger for small data sets. ``interval`` (>= 1).
    Composition: works under a grad scaler (it reads the scaled gradients without unscaling,
        and skips a step whose gradients overflowed, as the scaler will). MixUp/CutMix batches
        are reused as drawn for the second pass. Frozen layers have no gradient and are not
        perturbed. Its second pass is timed in ``state.method_seconds["sam"]``.
    In any training loop: :func:`ascend_` after the first backward, :func:`descend_` after the
        second, then the optimizer's step.

    >>> method = SAM(rho=0.05, interval=2)
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from fastcore_ops.checks import check_int, check_number
from fastcore_ops.training.methods.base import Method, TrainState
from fastcore_ops.training.methods.registry import register_method


# Its second pass recomputes the loss on the batch as it is: one target per input. Its in-place
# perturbation of the parameters is untested on FSDP's sharded ones.
@register_method("sam", stage="step", order=150, fsdp=False, one_target_per_input=True,
                 try_with={"interval": 10})
@dataclass(frozen=True)
class SAMOptions:
    """SAM's radius and how often it takes its second pass; ``methods.sam``."""

    rho: float = 0.05  # typical for ImageNet-scale SGD
    interval: int = 1  # the second pass on every interval-th step

    def __post_init__(self) -> None:
        check_number("rho", self.rho, low=0, low_open=True)
        check_int("interval", self.interval, low=1)

    def attach(self, config) -> Method:
        return SAM(self.rho, interval=self.interval)


def ascend_(params: list[torch.Tensor], rho: float, grad_scale: float = 1.0) -> list[torch.Tensor] | None:
    """Move ``params`` to ``w + rho * g / ||g||`` (``g`` their ``.grad`` divided by ``grad_scale``, the norm over
    all of them); the steps taken, for :func:`descend_`, or None when the gradient is not finite (nothing moved).

    SAM's first half, for any training loop: backward, ascend, backward again at the ascent point,
    descend, then the optimizer's step with that second gradient.

        >>> w = torch.nn.Parameter(torch.tensor([3.0, 4.0]))
        >>> w.grad = torch.tensor([3.0, 4.0])
        >>> steps = ascend_([w], rho=0.5)
        >>> w.data.tolist()
        [3.299999952316284, 4.400000095367432]
        >>> descend_([w], steps)
        >>> w.data.tolist()
        [3.0, 4.0]
    """
    grads = [p.grad for p in params]
    inverse_scale = 1.0 / grad_scale
    grad_norm = torch.nn.utils.get_total_norm(grads).float() * inverse_scale
    if not torch.isfinite(grad_norm):
        return None
    # The _foreach ops are the fused multi-tensor kernels torch.optim uses for the same job.
    with torch.no_grad():
        steps = torch._foreach_mul(grads, rho * inverse_scale / (grad_norm + 1e-12))
        torch._foreach_add_(params, steps)
    return steps


def descend_(params: list[torch.Tensor], steps: list[torch.Tensor]) -> None:
    """Move ``params`` back by the ``steps`` :func:`ascend_` took."""
    with torch.no_grad():
        torch._foreach_sub_(params, steps)


class SAM(Method):
    """Replaces the gradient by the gradient at the ascent point ``w + rho * g / ||g||``.

    >>> method = SAM(rho=0.05)
    """

    def __init__(self, rho: float, interval: int = 1):
        self.rho = check_number("rho", rho, low=0, low_open=True)
        self.interval = check_int("interval", interval, low=1)

    def cost_state(self, step: int, progress: float) -> str | None:
        return "sam second pass" if step % self.interval == 0 else None

    def on_after_backward(self, state: TrainState) -> None:
        if state.step % self.interval != 0:
            return
        if state.forward_backward is None:
            raise ValueError("state.forward_backward is None; SAM needs it to recompute the loss")
        params = [p for p in state.model.parameters() if p.grad is not None]
        if not params:
            return
        # The trainer unscales later (unscale_ may run once per step), so the scale is divided out here.
        scale = state.scaler.get_scale() if state.scaler.is_enabled() else 1.0
        perturbation = ascend_(params, self.rho, grad_scale=scale)
        if perturbation is None:
            return  # the scaler will skip this step anyway
        for p in params:
            p.grad = None

        started = time.perf_counter()
        state.forward_backward()
        if state.device.type == "cuda":
            torch.cuda.synchronize(state.device)  # so the timing covers the kernels, not their launch
        state.method_seconds["sam"] = state.method_seconds.get("sam", 0.0) + time.perf_counter() - started

        descend_(params, perturbation)
