"""Low-precision normalization: LayerNorm and GroupNorm compute in the autocast dtype, not in fp32.

Method card
    What: under CUDA's autocast, PyTorch runs ``layer_norm`` and ``group_norm`` in fp32: it
        casts a bf16 or fp16 input up, normalizes, and hands the next layer an fp32 tensor that
        the next matmul casts down again. This method makes every ``nn.LayerNorm`` and
        ``nn.GroupNorm`` normalize in the autocast dtype instead, with its weight and bias cast to
        it, and return that dtype; outside autocast (fp32 runs) they are unchanged (Composer's
        LowPrecisionLayerNorm and LowPrecisionGroupNorm do the same). A CPU's autocast already
        leaves both norms in their input's dtype: there only the weight's cast changes.
    When it helps: transformers trained in bf16 or fp16 on a GPU, whose norms are memory-bound:
        half the bytes read and written per norm, and no cast kernels around it. It does nothing
        for ResNets, whose norms are BatchNorm.
    Cost: the norm's statistics are computed from low-precision inputs; bf16 keeps fp32's range,
        so a transformer trains as before to within the noise of the seeds (check it on yours).
    Options (``LowPrecisionNormOptions``): none; ``methods.low_precision_norm={}`` turns it on.

    In any training loop, on a model about to train under autocast:

    >>> model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8))
    >>> low_precision_norms_(model)
    1
    >>> with torch.autocast("cpu", dtype=torch.bfloat16):
    ...     model(torch.randn(2, 8)).dtype
    torch.bfloat16
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from fastcore_ops.training.methods.base import Method, TrainState
from fastcore_ops.training.methods.registry import register_method


def _cast(parameter: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    return None if parameter is None else parameter.to(dtype)


def _normalized(norm: nn.Module, x: torch.Tensor, in_full_precision, normalize) -> torch.Tensor:
    """``normalize(x, weight, bias)`` in the autocast dtype, autocast off; ``in_full_precision(x)`` outside autocast."""
    device_type = x.device.type
    if not torch.is_autocast_enabled(device_type):
        return in_full_precision(x)
    dtype = torch.get_autocast_dtype(device_type)
    with torch.autocast(device_type, enabled=False):
        return normalize(x.to(dtype), _cast(norm.weight, dtype), _cast(norm.bias, dtype))


class LowPrecisionLayerNorm(nn.LayerNorm):
    """``nn.LayerNorm`` that normalizes in the autocast dtype; the same parameters and state dict."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _normalized(self, x, super().forward,
                           lambda x, weight, bias: F.layer_norm(x, self.normalized_shape, weight, bias, self.eps))


class LowPrecisionGroupNorm(nn.GroupNorm):
    """``nn.GroupNorm`` that normalizes in the autocast dtype; the same parameters and state dict."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _normalized(self, x, super().forward,
                           lambda x, weight, bias: F.group_norm(x, self.num_groups, weight, bias, self.eps))


_LOW_PRECISION = {nn.LayerNorm: LowPrecisionLayerNorm, nn.GroupNorm: LowPrecisionGroupNorm}


def low_precision_norms_(model: nn.Module) -> int:
    """Make every ``nn.LayerNorm`` and ``nn.GroupNorm`` of ``model`` normalize in the autocast dtype;
    how many it changed.

    The modules keep their parameters (an optimizer that holds them holds them still) and their
    state dict; only their class changes. Subclasses of the two norms are left as they are: their
    forward may differ.
    """
    changed = 0
    for module in model.modules():
        low_precision = _LOW_PRECISION.get(type(module))
        if low_precision is not None:
            module.__class__ = low_precision
            changed += 1
    return changed


class LowPrecisionNorm(Method):
    """Applies :func:`low_precision_norms_` to the run's model when training starts (and again on resume,
    which builds the model anew)."""

    def on_fit_start(self, state: TrainState) -> None:
        low_precision_norms_(state.model)


# First of the step methods: EMA and SWA then copy the changed modules.
@register_method("low_precision_norm", stage="step", order=105)
@dataclass(frozen=True)
class LowPrecisionNormOptions:
    """The method has no options: ``methods.low_precision_norm={}`` turns it on."""

    def attach(self, config) -> Method:
        return LowPrecisionNorm()
