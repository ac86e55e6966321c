"""How a model is spread over the processes torchrun starts: replicated (DDP) or sharded (FSDP2).

``ddp`` keeps a whole copy of the model on every process and averages gradients; ``fsdp``
(PyTorch's FSDP2, ``fully_shard``) keeps only a shard of each parameter, gradient and optimizer
state per process and gathers a block's parameters just for its forward and backward: for
models that outgrow one device's memory. This module is the one place that knows the
difference; the trainer asks it for the forward module and for full (unsharded) state dicts,
so a checkpoint holds plain tensors whatever the strategy and loads with ``weights_only``.

    >>> model = torch.nn.Linear(2, 2)
    >>> wrap(model, "ddp", torch.device("cpu"), find_unused_parameters=False) is model  # one process
    True
    >>> sorted(model_state(model))
    ['bias', 'weight']
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict,
                                                     get_optimizer_state_dict, set_model_state_dict,
                                                     set_optimizer_state_dict)
from torch.distributed.fsdp import FSDPModule, fully_shard

STRATEGIES = ("ddp", "fsdp")
# Full tensors, gathered to the CPU: what one process would have saved (and can load).
_FULL = StateDictOptions(full_state_dict=True, cpu_offload=True)


def wrap(model: nn.Module, strategy: str, device: torch.device, *, find_unused_parameters: bool) -> nn.Module:
    """The module the training forward pass goes through (``model`` itself outside torchrun).

    fsdp shards each entry of every ``nn.ModuleList`` (a transformer's blocks: the unit whose
    parameters are gathered at once) and then the root, which holds the rest (embeddings,
    tied output layer, final norm); ``model`` is sharded in place and is its own forward module.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
    if not dist.is_initialized():
        return model
    if strategy == "ddp":
        return nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None,
                                                   find_unused_parameters=find_unused_parameters)
    for module in list(model.modules()):
        if isinstance(module, nn.ModuleList):
            for block in module:
                if any(True for _ in block.parameters()):
                    fully_shard(block)
    fully_shard(model)
    return model


def is_sharded(model: nn.Module) -> bool:
    """Whether ``model`` was sharded by :func:`wrap` (its forward passes are collective)."""
    return isinstance(model, FSDPModule)


def model_state(model: nn.Module) -> dict:
    """The model's state dict with whole tensors (gathered from every process when sharded)."""
    return get_model_state_dict(model, options=_FULL) if is_sharded(model) else model.state_dict()


def load_model_state(model: nn.Module, state: dict) -> None:
    """Load a state dict of whole tensors (each process keeps its shard when sharded)."""
    if is_sharded(model):
        set_model_state_dict(model, state, options=_FULL)
    else:
        model.load_state_dict(state)


def optimizer_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict:
    """The optimizer's state dict with whole tensors, like :func:`model_state`."""
    return get_optimizer_state_dict(model, optimizer, options=_FULL) if is_sharded(model) else optimizer.state_dict()


def load_optimizer_state(model: nn.Module, optimizer: torch.optim.Optimizer, state: dict) -> None:
    if is_sharded(model):
        set_optimizer_state_dict(model, optimizer, state, options=_FULL)
    else:
        optimizer.load_state_dict(state)
