"""Stochastic depth surgery (Huang et al., 2016) for torchvision ResNet blocks.

Method card
    What: each ResNet block's residual branch is dropped during training with a probability
        that rises linearly with depth up to ``drop_rate`` (the block then passes its input
        through); a kept branch is scaled by 1 / (1 - p), so evaluation runs every branch as it is.
    When it helps: deep networks trained long enough to overfit (the Hot recipes); shallow,
        short runs usually lose accuracy.
    Cost: none; in "block" mode a dropped branch is not computed, so steps get cheaper.
    Options: ``drop_rate`` 0.2, ``mode`` "block" (whole batch, skips compute) or "sample".
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torchvision.ops
from torch import nn
from torchvision.models.resnet import BasicBlock, Bottleneck

from ..checks import check_choice, check_number, check_str
from .core import Plan, Replacement, apply_surgery, count_modules, find_sites, register_surgery


def _basic_branch(block: BasicBlock, x):
    out = block.relu(block.bn1(block.conv1(x)))
    return block.bn2(block.conv2(out))


def _bottleneck_branch(block: Bottleneck, x):
    out = block.relu(block.bn1(block.conv1(x)))
    out = block.relu(block.bn2(block.conv2(out)))
    return block.bn3(block.conv3(out))


_BRANCHES = {BasicBlock: _basic_branch, Bottleneck: _bottleneck_branch}


class StochasticDepthBlock(nn.Module):
    """A ResNet block whose residual branch is dropped with probability ``drop_rate`` in training.

    ``mode="block"`` drops the branch for the whole batch and then skips computing it (the
    speed-up); ``mode="sample"`` drops it per sample (``torchvision.ops.stochastic_depth``'s
    "row" mode). Kept branches are scaled by 1 / (1 - drop_rate); in eval the block is unchanged.
    Randomness comes from torch's global generator (``torch.manual_seed``).
    """

    def __init__(self, block: nn.Module, drop_rate: float, mode: str):
        super().__init__()
        self.block = block
        self.drop_rate = drop_rate
        self.mode = mode

    def forward(self, x):
        block = self.block
        identity = x if block.downsample is None else block.downsample(x)
        if not self.training or self.drop_rate == 0:
            return block.relu(_BRANCHES[type(block)](block, x) + identity)
        if self.mode == "block":
            if bool(torch.rand(()) < self.drop_rate):
                # Out of place: the block's ReLU is in-place and identity may be the input itself.
                return torch.relu(identity)
            return block.relu(_BRANCHES[type(block)](block, x) / (1 - self.drop_rate) + identity)
        residual = torchvision.ops.stochastic_depth(_BRANCHES[type(block)](block, x), self.drop_rate, "row", True)
        return block.relu(residual + identity)

    def extra_repr(self) -> str:
        return f"drop_rate={self.drop_rate:.4f}, mode={self.mode!r}"


@dataclass
class StochasticDepthOptions:
    drop_rate: float = 0.2  # the deepest block's drop probability; earlier blocks rise linearly to it
    mode: str = "block"  # "block": the whole batch at once (and skip the compute), "sample": per sample

    def validate(self):
        check_number("drop_rate", self.drop_rate, low=0, high=1, high_open=True)
        check_choice("mode", check_str("mode", self.mode), ("block", "sample"))


@register_surgery(
    "stochastic_depth",
    "drop the residual branch of torchvision ResNet blocks, with probability rising linearly to drop_rate",
    StochasticDepthOptions,
)
def plan_stochastic_depth(model: nn.Module, options: StochasticDepthOptions) -> Plan:
    sites = find_sites(model, lambda m: type(m) in _BRANCHES, skip=(StochasticDepthBlock,))
    replacements = [
        Replacement(site, StochasticDepthBlock(site.module, options.drop_rate * (i + 1) / len(sites), options.mode))
        for i, site in enumerate(sites)
    ]
    return Plan(replacements, already_applied=count_modules(model, (StochasticDepthBlock,)))


def apply_stochastic_depth(model: nn.Module, optimizers=None, **options):
    """Apply the ``stochastic_depth`` surgery alone; see :func:`apply_surgery`.

    Example:
        >>> print(apply_stochastic_depth(torchvision.models.resnet18(num_classes=10), drop_rate=0.1, mode="sample"))
        stochastic_depth: 8 modules replaced, +0 / -0 parameters
          layer1.0  BasicBlock -> StochasticDepthBlock
        ...
    """
    return apply_surgery(model, [("stochastic_depth", options)], optimizers)
