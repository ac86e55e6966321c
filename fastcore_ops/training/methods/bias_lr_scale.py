"""Bias learning-rate scale: train the normalization layers' biases at a multiple of the learning rate.

Method card
    What: the biases of the normalization layers (BatchNorm, GroupNorm, LayerNorm) leave their
        parameter groups for groups of their own, at ``scale`` times the run's learning rate,
        which the schedule then scales as it does every group's. Their weight decay per step is
        kept as it was: the group's coefficient is divided by ``scale``, except under SGDW, whose
        decay does not grow with the learning rate (``optimizer.decoupled_weight_decay``). As in Jordan's
        airbench94 (arXiv 2404.00498), whose ``bias_scaler`` is 64.
    When it helps: networks whose normalization layers have fixed scales (airbench94's
        BatchNorms train only their biases): the biases then set each channel's threshold,
        and a learning rate fit for the filters moves them too slowly in a short run.
    Hyperparameters: ``scale`` (64, airbench94's).
    Cost: none.
    Composition: any SGD-family optimizer; LAMB and LARS rescale each update by their own trust
        ratio, and leave groups without weight decay unadapted.

    >>> model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
    >>> groups = bias_lr_groups(model, [{"params": list(model.parameters()), "weight_decay": 1e-3}],
    ...                         lr=0.1, scale=64.0, decay_follows_lr=True)
    >>> [(len(group["params"]), group.get("lr")) for group in groups]
    [(3, None), (1, 6.4)]
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from fastcore_ops.checks import check_number
from fastcore_ops.surgery.ghost_batchnorm import GhostBatchNorm
from fastcore_ops.training.methods.registry import register_method

# Modules whose weights are scales and shifts, not filters (the optimizer's groups exempt them from decay on request);
# GhostBatchNorm holds the very BatchNorm parameters it replaced.
NORM_TYPES = (nn.modules.batchnorm._NormBase, nn.GroupNorm, nn.LayerNorm, GhostBatchNorm)


def norm_biases(model: nn.Module) -> list[nn.Parameter]:
    """The trainable biases of ``model``'s normalization layers, each once.

        >>> [tuple(p.shape) for p in norm_biases(torch.nn.Sequential(torch.nn.Conv2d(1, 3, 1), torch.nn.BatchNorm2d(3)))]
        [(3,)]
    """
    found = {id(module.bias): module.bias for module in model.modules()
             if isinstance(module, NORM_TYPES) and module.bias is not None and module.bias.requires_grad}
    return list(found.values())


def bias_lr_groups(model: nn.Module, groups: list[dict], *, lr: float, scale: float,
                   decay_follows_lr: bool) -> list[dict]:
    """``groups`` with the normalization biases of ``model`` moved to groups of their own at ``lr * scale``.

    Each group that held some gets a twin holding them, with its options, its ``lr`` times ``scale`` and, where the
    optimizer's decay per step grows with the learning rate (``decay_follows_lr``), its ``weight_decay`` divided
    by ``scale``, so the decay per step stays as it was.
    """
    scaled = {id(parameter) for parameter in norm_biases(model)}
    if not scaled:
        raise ValueError(f"bias_lr_scale found no trainable normalization bias in {type(model).__name__}; set "
                         f"methods.bias_lr_scale=None for this model")
    kept, twins = [], []
    for group in groups:
        params = list(group["params"])
        others = [p for p in params if id(p) not in scaled]
        if others:
            kept.append({**group, "params": others})
        biases = [p for p in params if id(p) in scaled]
        if biases:
            group_lr = group.get("lr", lr) * scale
            decay = group.get("weight_decay", 0.0) / scale if decay_follows_lr else group.get("weight_decay", 0.0)
            twins.append({**group, "params": biases, "lr": group_lr, "weight_decay": decay})
    return kept + twins


@register_method("bias_lr_scale", stage="optimizer", order=10)
@dataclass(frozen=True)
class BiasLRScaleOptions:
    """The multiple of the learning rate the normalization biases train at; ``methods.bias_lr_scale``.

        >>> BiasLRScaleOptions(scale=0)
        Traceback (most recent call last):
        ...
        ValueError: scale must be a number > 0, got 0
    """

    scale: float = 64.0  # airbench94's bias_scaler

    def __post_init__(self) -> None:
        check_number("scale", self.scale, low=0, low_open=True)

    def shape_groups(self, model: nn.Module, groups: list[dict], *, lr: float, decay_follows_lr: bool) -> list[dict]:
        """The optimizer's ``groups``, the normalization biases at ``scale`` times ``lr``: :func:`bias_lr_groups`."""
        return bias_lr_groups(model, groups, lr=lr, scale=self.scale, decay_follows_lr=decay_follows_lr)
