"""Stochastic depth surgery (Huang et al., 2016) for torchvision's and timm's ResNet blocks.

Method card
    What: each ResNet block's residual branch is dropped during training with a probability
        that rises linearly with depth up to ``drop_rate`` (the block then passes its input
        through); a kept branch is scaled by 1 / (1 - p), so evaluation runs every branch as it is.
        A timm model built with ``drop_path_rate`` > 0 already does this: it is left as it is.
    When it helps: deep networks trained long enough to overfit (the Hot recipes); shallow,
        short runs usually lose accuracy.
    Cost: none; in "block" mode a dropped branch of a torchvision block is not computed, so steps
        get cheaper (timm's blocks compute the branch before their drop_path slot drops it).
    Options: ``drop_rate`` 0.2, ``mode`` "block" (whole batch, skips compute) or "sample".
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torchvision.ops
from torch import nn
from torchvision.models.resnet import BasicBlock, Bottleneck

from ..checks import check_choice, check_number, check_str
from .core import (Plan, Replacement, Site, apply_surgery, count_modules, find_sites, imported_classes,
                   register_surgery, skip_for_existing)


def _basic_branch(block: BasicBlock, x):
    out = block.relu(block.bn1(block.conv1(x)))
    return block.bn2(block.conv2(out))


def _bottleneck_branch(block: Bottleneck, x):
    out = block.relu(block.bn1(block.conv1(x)))
    out = block.relu(block.bn2(block.conv2(out)))
    return block.bn3(block.conv3(out))


_BRANCHES = {BasicBlock: _basic_branch, Bottleneck: _bottleneck_branch}

# timm's ResNet blocks, which call ``self.drop_path`` (None when built without drop paths) on their branch.
_TIMM_BLOCKS = {"timm.models.resnet": ("BasicBlock", "Bottleneck")}


class DropBranch(nn.Module):
    """The drop of a residual branch: with probability ``drop_rate`` in training, a kept branch scaled by 1 / (1 - p).

    ``mode="block"`` drops the branch for the whole batch, ``mode="sample"`` per sample
    (``torchvision.ops.stochastic_depth``'s "row" mode); in eval the branch passes as it is.
    Randomness comes from torch's global generator (``torch.manual_seed``). Called on a computed
    branch it is timm's ``drop_path``; :class:`StochasticDepthBlock` asks it first, to skip the compute.

    Example:
        >>> drop = DropBranch(0.5, "sample")
        >>> drop(torch.ones(64, 2)).unique().tolist()  # each sample's branch dropped, or kept and scaled
        [0.0, 2.0]
        >>> drop.eval()(torch.ones(64, 2)).unique().tolist()
        [1.0]
    """

    def __init__(self, drop_rate: float, mode: str):
        super().__init__()
        self.drop_rate = drop_rate
        self.mode = mode

    def drops_batch(self) -> bool:
        """Draw, in block mode while training, whether the branch is dropped for the whole batch this step."""
        return self.training and self.mode == "block" and self.drop_rate > 0 and bool(torch.rand(()) < self.drop_rate)

    def kept(self, branch: torch.Tensor) -> torch.Tensor:
        """A branch :meth:`drops_batch` kept: scaled (block mode), dropped per sample (sample mode), or as it is."""
        if not self.training or self.drop_rate == 0:
            return branch
        if self.mode == "block":
            return branch / (1 - self.drop_rate)
        return torchvision.ops.stochastic_depth(branch, self.drop_rate, "row", True)

    def forward(self, branch: torch.Tensor) -> torch.Tensor:
        # Zeros that do not depend on the branch give its parameters no gradient, as a skipped branch does.
        return torch.zeros_like(branch) if self.drops_batch() else self.kept(branch)

    def extra_repr(self) -> str:
        return f"drop_rate={self.drop_rate:.4f}, mode={self.mode!r}"


class StochasticDepthBlock(nn.Module):
    """A torchvision ResNet block whose residual branch is dropped by ``drop`` (a :class:`DropBranch`) in training.

    A branch dropped for the whole batch is not computed (block mode's speed-up); in eval the
    block is unchanged.
    """

    def __init__(self, block: nn.Module, drop_rate: float, mode: str):
        super().__init__()
        self.block = block
        self.drop = DropBranch(drop_rate, mode)

    def forward(self, x):
        block = self.block
        identity = x if block.downsample is None else block.downsample(x)
        if self.drop.drops_batch():
            # Out of place: the block's ReLU is in-place and identity may be the input itself.
            return torch.relu(identity)
        return block.relu(self.drop.kept(_BRANCHES[type(block)](block, x)) + identity)


def _operate(site: Site, drop_rate: float, mode: str) -> Replacement:
    """torchvision's block wrapped, or a DropBranch in the empty ``drop_path`` slot of timm's.

    timm's blocks call ``drop_path`` on the branch just before adding the shortcut, where the
    wrapper applies its drop, and timm's own DropPath is the same per-sample drop (Bernoulli
    keep, scaled by 1 / keep): filling the slot gives the torchvision path's semantics through
    timm's own forward, with no copy of timm's block code to fall out of step with its releases.
    """
    block = site.module
    if type(block) in _BRANCHES:
        return Replacement(site, StochasticDepthBlock(block, drop_rate, mode))
    return Replacement(Site(f"{site.path}.drop_path", block, "drop_path", block.drop_path), DropBranch(drop_rate, mode))


def _has_drop_path(block: nn.Module) -> bool:
    """Whether a timm block was built with a drop path of its own (an empty slot is None, or Identity)."""
    slot = getattr(block, "drop_path", None)
    return slot is not None and not isinstance(slot, nn.Identity)


@dataclass
class StochasticDepthOptions:
    drop_rate: float = 0.2  # the deepest block's drop probability; earlier blocks rise linearly to it
    mode: str = "block"  # "block": the whole batch at once (and skip the compute), "sample": per sample

    def validate(self):
        check_number("drop_rate", self.drop_rate, low=0, high=1, high_open=True)
        check_choice("mode", check_str("mode", self.mode), ("block", "sample"))


@register_surgery(
    "stochastic_depth",
    "drop the residual branch of torchvision and timm ResNet blocks, with probability rising linearly to drop_rate",
    StochasticDepthOptions,
    order=40,
    inputs="images",
    leaves_parameters_unused=True,  # in its "block" mode a dropped block's parameters get no gradient in that step
    tried_with={"drop_rate": 0.05},
)
def plan_stochastic_depth(model: nn.Module, options: StochasticDepthOptions) -> Plan:
    timm_blocks = imported_classes(_TIMM_BLOCKS)

    def wanted(module):
        operated = isinstance(getattr(module, "drop_path", None), DropBranch)
        return type(module) in _BRANCHES or (type(module) in timm_blocks and not operated)

    sites = find_sites(model, wanted, skip=(StochasticDepthBlock,))
    already = count_modules(model, (DropBranch,))
    dropping = [f"{site.path}.drop_path" for site in sites if _has_drop_path(site.module)]
    if dropping:
        # The rates rise with depth over all the blocks: adding ours beside timm's would mix two schedules.
        return skip_for_existing(sites, "stochastic depth (timm's DropPath, from drop_path_rate > 0)", dropping,
                                 "leave stochastic_depth out, or build the model with drop_path_rate=0 to use this "
                                 "surgery's schedule instead", already)
    rates = [options.drop_rate * (i + 1) / len(sites) for i in range(len(sites))]
    return Plan([_operate(site, rate, options.mode) for site, rate in zip(sites, rates)], already_applied=already)


def apply_stochastic_depth(model: nn.Module, optimizers=None, **options):
    """Apply the ``stochastic_depth`` surgery alone; see :func:`apply_surgery`.

    Example:
        >>> print(apply_stochastic_depth(torchvision.models.resnet18(num_classes=10), drop_rate=0.1, mode="sample"))
        stochastic_depth: 8 modules replaced, +0 / -0 parameters
          layer1.0  BasicBlock -> StochasticDepthBlock
        ...
    """
    return apply_surgery(model, [("stochastic_depth", options)], optimizers)
