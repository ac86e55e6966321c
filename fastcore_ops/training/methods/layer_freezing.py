"""Layer freezing: stop training the first layers progressively over the last part of the run.

Method card
    What: the model's layers are the modules that own parameters, in registration order (for
        a ResNet the forward order: stem first, classifier last; for a GPT the embeddings, then
        the blocks). From ``start`` of the run on, after every 1% of the run's steps (so runs
        shorter than an epoch, as language models train, freeze too) the first
        ``floor(L * level * (progress - start) / (1 - start))`` layers are frozen: no gradient,
        out of the optimizer and its state, for the rest of the run.
    When it helps: early layers converge first, so late in training their backward pass and
        update are mostly wasted work; freezing them cuts step time for a small accuracy cost.
        Worth it on tight budgets; on long runs for best accuracy, leave it off.
    Options (``LayerFreezingOptions``): ``start`` in [0, 1), the fraction of the run where
        freezing begins (0.5); ``level`` in (0, 1], the fraction of layers frozen by the end of
        the run (0.5).
    Composition: apply after model surgery (it reads the final module tree). Frozen weights
        still enter EMA/SWA averages (unchanged from then on) and SAM skips them. Not for
        DistributedDataParallel, whose gradient buckets are fixed when it wraps the model.
        On resume ``on_fit_start`` refreezes from ``state.progress``.

    >>> method = LayerFreezing(freeze_start=0.5, freeze_level=0.75)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from fastcore_ops.checks import check_int, check_number
from fastcore_ops.training.methods.base import Method, TrainState
from fastcore_ops.training.methods.registry import register_method


# DDP fixes its gradient buckets when it wraps the model, and FSDP its shards: parameters frozen
# later break both.
@register_method("layer_freezing", stage="step", order=160, ddp=False, fsdp=False)
@dataclass(frozen=True)
class LayerFreezingOptions:
    """Where freezing begins and how much of the model is frozen by the end; ``methods.layer_freezing``."""

    start: float = 0.5  # fraction of the run
    level: float = 0.5  # fraction of the layers

    def __post_init__(self) -> None:
        check_number("start", self.start, low=0, high=1, high_open=True)
        check_number("level", self.level, low=0, high=1, low_open=True)

    def attach(self, config) -> Method:
        return LayerFreezing(self.start, self.level)


def parameterised_layers(model: torch.nn.Module) -> list[list[torch.nn.Parameter]]:
    """Each layer's own parameters, layers in registration order; a parameter shared by several
    layers belongs to the last, so that a GPT's input embedding, tied to its output layer, is
    frozen only with that last layer.

    >>> from fastcore_ops.training.models.gpt import GPT, GPTConfig
    >>> gpt = GPT(GPTConfig(n_layer=1, n_head=1, n_embd=8, max_sequence_length=4))
    >>> [len(layer) for layer in parameterised_layers(gpt)]  # wpe, ln_1, attention, ..., ln_f, lm_head = wte
    [1, 2, 2, 2, 2, 2, 2, 2, 1]
    """
    owner = {}  # id(parameter) -> index of the last module holding it
    modules = list(model.modules())
    for index, module in enumerate(modules):
        for parameter in module.parameters(recurse=False):
            owner[id(parameter)] = index
    layers = []
    for index, module in enumerate(modules):
        params = [p for p in module.parameters(recurse=False) if owner[id(p)] == index]
        if params:
            owner.update((id(p), -1) for p in params)  # a parameter registered twice in one module: once
            layers.append(params)
    return layers


def freeze_layers(model: torch.nn.Module, optimizer: torch.optim.Optimizer, count: int) -> int:
    """Freeze the first ``count`` layers of ``model``; return how many of its layers are frozen now.

    Frozen parameters get ``requires_grad=False``, lose their gradient, and are removed from
    every param group and from the optimizer's state (groups stay, possibly empty, so learning
    rate schedulers keep their per-group lists). Freezing is never undone: a smaller ``count``
    than before changes nothing, and repeating a call is a no-op.

    >>> model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    >>> optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    >>> freeze_layers(model, optimizer, 1)
    1
    >>> len(optimizer.param_groups[0]["params"])
    2
    """
    check_int("count", count, low=0)
    layers = parameterised_layers(model)
    freeze_parameters(optimizer, [p for layer in layers[:count] for p in layer])
    return sum(all(not p.requires_grad for p in layer) for layer in layers)


def freeze_parameters(optimizer: torch.optim.Optimizer, parameters: list[torch.nn.Parameter]) -> None:
    """Stop training ``parameters``: no gradient, out of every param group of ``optimizer`` and out of its state.

    Groups stay, possibly empty, so learning rate schedulers keep their per-group lists; freezing a
    frozen parameter changes nothing.

    >>> layer = torch.nn.Linear(2, 2)
    >>> optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
    >>> freeze_parameters(optimizer, [layer.bias])
    >>> layer.bias.requires_grad, len(optimizer.param_groups[0]["params"])
    (False, 1)
    """
    frozen_ids = {id(p) for p in parameters}
    for p in parameters:
        p.requires_grad_(False)
        p.grad = None
        optimizer.state.pop(p, None)
    for group in optimizer.param_groups:
        group["params"] = [p for p in group["params"] if id(p) not in frozen_ids]


class LayerFreezing(Method):
    """Freezes ``freeze_level`` of the layers, first layers first, over the run after ``freeze_start``.

    >>> method = LayerFreezing(freeze_start=0.5, freeze_level=1.0)
    >>> method.layers_to_freeze(num_layers=10, progress=0.75)
    5
    """

    def __init__(self, freeze_start: float, freeze_level: float):
        self.freeze_start = check_number("freeze_start", freeze_start, low=0, high=1, high_open=True)
        self.freeze_level = check_number("freeze_level", freeze_level, low=0, high=1)

    def layers_to_freeze(self, num_layers: int, progress: float) -> int:
        """How many of ``num_layers`` layers are frozen at ``progress`` (fraction of the run)."""
        fraction = self.freeze_level * (progress - self.freeze_start) / (1 - self.freeze_start)
        # The small margin keeps exact products (e.g. 10 * 0.3) from flooring one layer short.
        return max(0, math.floor(num_layers * fraction + 1e-9))

    def cost_state(self, step: int, progress: float) -> str | None:
        # The share of layers frozen, to the nearest 5%: a step's backward pass shrinks with it.
        share = max(0.0, self.freeze_level * (progress - self.freeze_start) / (1 - self.freeze_start))
        return f"{round(share * 20) * 5}% of layers frozen" if share > 0 else None

    def on_fit_start(self, state: TrainState) -> None:
        self._freeze(state)

    def on_step_end(self, state: TrainState) -> None:
        if state.step % max(1, state.total_steps // 100) == 0:
            self._freeze(state)

    def _freeze(self, state: TrainState) -> None:
        count = self.layers_to_freeze(len(parameterised_layers(state.model)), state.progress)
        if count:
            freeze_layers(state.model, state.optimizer, count)
