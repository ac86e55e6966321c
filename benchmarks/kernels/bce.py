"""Fused BCE-with-logits cases: ImageNet's 1000 classes and a 32000-token vocabulary."""

from __future__ import annotations

import torch

from fastcore_ops.kernels import bce_with_logits
from fastcore_ops.kernels.bce import bce_with_logits_reference

from . import Case, Traffic, element_size

SIZES = [(2048, 1000), (2048, 32000)]
SMOOTHING = 0.1
TINY = [(37, 11)]  # the small mode's, which runs Triton's interpreter


def _reference_traffic(n: int, c: int, b: int, index_target: bool) -> Traffic:
    """ATen's composite ops, pass by pass, in fp32 (b is the logits' element size)."""
    nc = n * c
    upcast = 0 if b == 4 else nc * b + nc * 4  # logits.to(float32), and the gradient back
    # one_hot writes int64 and .to() converts it; the smoothing multiply and add are a pass each.
    target = (nc * 8 + nc * 8 + nc * 4) if index_target else 0
    target += 2 * (nc * 4 + nc * 4)
    # binary_cross_entropy_with_logits: log_sigmoid(x); (1 - t); .mul_(x); .sub_(log_sigmoid); sum.
    loss = 2 * nc * 4 + 2 * nc * 4 + 3 * nc * 4 + 3 * nc * 4 + nc * 4
    # backward: sigmoid(x); minus t; times grad / N.
    backward = 2 * nc * 4 + 3 * nc * 4 + 2 * nc * 4
    temporaries = (nc * 8 + nc * 4 if index_target else 0) + 3 * nc * 4
    forward = upcast + target + loss
    return Traffic(forward, forward + backward + upcast, temporaries)


def cases(dtype: torch.dtype, device: torch.device, tiny: bool = False) -> list[Case]:
    b = element_size(dtype)
    result = []
    for n, c in TINY if tiny else SIZES:
        for index_target in (True, False):
            def make(n=n, c=c, index_target=index_target):
                logits = torch.randn(n, c, device=device, dtype=dtype).requires_grad_()
                if index_target:
                    target = torch.randint(0, c, (n,), device=device)
                else:  # a MixUp of two one-hot targets
                    target = torch.zeros(n, c, device=device)
                    target[torch.arange(n), torch.randint(0, c, (n,))] += 0.7
                    target[torch.arange(n), torch.randint(0, c, (n,))] += 0.3
                return logits, target

            nc = n * c
            target_bytes = n * 8 if index_target else nc * 4
            # One pass reads the logits (and targets) and writes the gradient; backward scales it.
            ours = Traffic(nc * b + target_bytes + nc * b, nc * b + target_bytes + nc * b + 2 * nc * b, nc * b)
            result.append(Case(
                "bce_with_logits", f"{n}x{c} {'labels' if index_target else 'mixed'}", make,
                lambda x, t: bce_with_logits(x, t, label_smoothing=SMOOTHING),
                lambda x, t: bce_with_logits_reference(x, t, label_smoothing=SMOOTHING),
                ours, _reference_traffic(n, c, b, index_target),
            ))
    return result
