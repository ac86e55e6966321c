"""Muon: the convolution filters step along their orthogonalized momentum; everything else stays on SGD.

Method card
    What: each trainable convolution filter bank (a 4-D weight, read as a matrix of its output
        channels by the rest) leaves SGD for Muon (Jordan et al., 2024, "Muon: an optimizer for
        hidden layers"): its Nesterov momentum is replaced by the nearest semi-orthogonal matrix,
        approximated by a few Newton-Schulz iterations, so that every direction of the update
        moves by about as much; and before each step the bank is rescaled to a norm of
        sqrt(output channels), which a BatchNorm after it makes free to choose. The biases, the
        normalization layers and the head stay on the run's SGD, at its learning rate.
    When it helps: conv nets trained for a few epochs at large batches: airbench94_muon reaches
        airbench94's 94% on CIFAR-10 in 8 epochs instead of 9.9 (batch 2000, on an A100). Here, in
        ``cifar_record_muon``, timed against airbench94 in one sitting on held-out seeds 3 to 5 (a
        2-core Zen 4 EPYC): 90.69% with airbench94's TTA (89.72% plain) after 400,000 images, against
        its 90.52% (89.80%) after 487,424, in 1/1.19 of its time
        (reports/cifar-record-muon-peers-20261202/).
    Hyperparameters: ``lr`` (0.24, airbench94_muon's; the run's schedule scales it as it scales every
        group's; not scaled with the batch, since an orthogonalized step's size does not depend on it),
        ``momentum`` (0.6), ``nesterov`` (True), ``newton_schulz_steps`` (3).
    Cost: per step and filter bank, 3 products per Newton-Schulz iteration of matrices no larger
        than the bank: for airbench94's network about 6 GFLOP a step at 3 iterations, under 1% of
        its forward and backward at batch 1024 (some 700 GFLOP).
    Composition: beside SGD with coupled weight decay (``optimizer.name="sgd"``,
        ``decoupled_weight_decay=False``); the filters take no weight decay, their norm being fixed.

    >>> model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8))
    >>> groups = muon_groups(model, [{"params": list(model.parameters())}], MuonOptions())
    >>> [(len(group["params"]), group.get("muon", False)) for group in groups]
    [(3, False), (1, True)]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from fastcore_ops.checks import check_bool, check_int, check_number
from fastcore_ops.training.methods.registry import IMAGES, register_method

# The quintic Newton-Schulz iteration's coefficients from the Muon write-up: chosen for the steepest rise near
# zero, so that few iterations bring every singular value near 1 (to about 0.7-1.2, not exactly 1).
NEWTON_SCHULZ_COEFFICIENTS = (3.4445, -4.7750, 2.0315)


def orthogonalized(matrix: torch.Tensor, steps: int) -> torch.Tensor:
    """``matrix`` (2-D) with its singular values moved towards 1 and its singular vectors kept, in float32.

    Float32, not airbench's bfloat16: on a CPU these products are a small part of a step, and float32 keeps
    them the same on CPUs with and without bf16 units.

        >>> singular = torch.linalg.svdvals(orthogonalized(torch.randn(16, 48), steps=5))
        >>> bool((singular > 0.6).all() and (singular < 1.3).all())
        True
    """
    x = matrix.float()
    x = x / (x.norm() + 1e-7)  # every singular value at most 1, where the iteration converges
    tall = x.shape[0] > x.shape[1]
    if tall:  # iterate on the smaller Gram matrix
        x = x.T
    a, b, c = NEWTON_SCHULZ_COEFFICIENTS
    for _ in range(steps):
        gram = x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x.T if tall else x


@torch.no_grad()
def muon_step_(weight: torch.Tensor, grad: torch.Tensor, buffer: torch.Tensor, *, lr: float, momentum: float,
               nesterov: bool, steps: int) -> None:
    """One Muon step of the filter bank ``weight`` in place, its momentum ``buffer`` updated with ``grad``.

        >>> weight, grad = torch.randn(4, 2, 3, 3), torch.randn(4, 2, 3, 3)
        >>> muon_step_(weight, grad, torch.zeros_like(grad), lr=0.0, momentum=0.6, nesterov=True, steps=3)
        >>> round(weight.norm().item() ** 2, 4)  # rescaled to a norm of sqrt(4 output channels)
        4.0
    """
    buffer.mul_(momentum).add_(grad)
    direction = grad.add(buffer, alpha=momentum) if nesterov else buffer
    norm = weight.norm()
    if norm > 0:  # a bank of zeros has no direction to keep
        weight.mul_(math.sqrt(weight.shape[0]) / norm)
    update = orthogonalized(direction.reshape(len(direction), -1), steps).view(weight.shape)
    weight.add_(update.to(weight.dtype), alpha=-lr)


def filter_banks(model: nn.Module) -> list[nn.Parameter]:
    """The trainable 4-D weights of ``model`` (its convolution filters), each once.

        >>> [tuple(p.shape) for p in filter_banks(torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.Linear(2, 2)))]
        [(2, 1, 3, 3)]
    """
    return [parameter for parameter in model.parameters() if parameter.dim() == 4 and parameter.requires_grad]


def muon_groups(model: nn.Module, groups: list[dict], options: MuonOptions) -> list[dict]:
    """``groups`` without the filter banks of ``model``, and one group of them marked ``muon``, at ``options.lr``."""
    banks = {id(parameter) for parameter in filter_banks(model)}
    if not banks:
        raise ValueError(f"muon found no trainable convolution filter in {type(model).__name__}; set methods.muon=None "
                         f"for this model")
    kept = [{**group, "params": [p for p in group["params"] if id(p) not in banks]} for group in groups]
    muon = {"params": [p for group in groups for p in group["params"] if id(p) in banks], "lr": options.lr,
            "momentum": options.momentum, "nesterov": options.nesterov, "weight_decay": 0.0,
            "newton_schulz_steps": options.newton_schulz_steps, "muon": True}
    return [group for group in kept if group["params"]] + [muon]


class MuonSGD(torch.optim.SGD):
    """torch's SGD for its groups but those marked ``muon``, whose filter banks take :func:`muon_step_`.

    Written here because torch.optim.Muon takes 2-D parameters only (a filter bank is 4-D) and does not rescale the
    weights as airbench94_muon does. One optimizer, not two, so that the trainer's schedule, checkpoints and loss
    scaler see every group as they see any optimizer's.
    """

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        every_group = self.param_groups
        self.param_groups = [group for group in every_group if not group.get("muon")]
        try:
            super().step()  # SGD over the other groups: their state is keyed by parameter, as ours is
        finally:
            self.param_groups = every_group
        for group in (group for group in every_group if group.get("muon")):
            for weight in group["params"]:
                if weight.grad is None:
                    continue
                state = self.state[weight]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(weight.grad)
                muon_step_(weight, weight.grad, state["momentum_buffer"], lr=group["lr"], momentum=group["momentum"],
                           nesterov=group["nesterov"], steps=group["newton_schulz_steps"])
        return loss


def check_beside_sgd(optimizer) -> None:
    """Refuse an ``optimizer`` configuration Muon cannot run beside: anything but SGD with coupled weight decay."""
    if optimizer.name != "sgd" or optimizer.decoupled_weight_decay:
        raise ValueError(f"methods.muon runs beside SGD with coupled weight decay, got optimizer.name="
                         f"{optimizer.name!r}, decoupled_weight_decay={optimizer.decoupled_weight_decay}; set "
                         f"optimizer.name='sgd' and optimizer.decoupled_weight_decay=False, or methods.muon=None")


def _check_run(options: MuonOptions, config) -> None:
    check_beside_sgd(config.optimizer)


# After bias_lr_scale (10): the filters leave whichever groups the earlier methods made.
@register_method("muon", stage="optimizer", order=20, tasks=IMAGES, check=_check_run)
@dataclass(frozen=True)
class MuonOptions:
    """Muon's learning rate, momentum and Newton-Schulz iterations for the filter banks; ``methods.muon``.

        >>> MuonOptions(newton_schulz_steps=0)
        Traceback (most recent call last):
        ...
        ValueError: newton_schulz_steps must be an int >= 1, got 0
    """

    lr: float = 0.24
    momentum: float = 0.6
    nesterov: bool = True
    newton_schulz_steps: int = 3

    def __post_init__(self) -> None:
        check_number("lr", self.lr, low=0, low_open=True)
        check_number("momentum", self.momentum, low=0, high=1, high_open=True)
        check_bool("nesterov", self.nesterov)
        check_int("newton_schulz_steps", self.newton_schulz_steps, low=1)

    def shape_groups(self, model: nn.Module, groups: list[dict], *, lr: float, decay_follows_lr: bool) -> list[dict]:
        """The optimizer's ``groups``, the filter banks moved to a Muon group of their own: :func:`muon_groups`."""
        return muon_groups(model, groups, self)
