"""Fused binary cross-entropy with logits, the loss of the ResNet recipes.

    loss = sum over samples n and classes c of BCE(logits[n, c], target[n, c]) / N

Summing over classes and dividing by the batch size keeps the loss (and its gradient)
at the scale of cross-entropy; the plain mean over N * C makes it vanish as C grows.
One pass over the logits computes the loss and its gradient together; backward only
scales the saved gradient. Class-index targets are compared against the column index
in registers, so the one-hot matrix never exists. Label smoothing is applied on the fly:
target * (1 - s) + s / C.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..checks import check_number, check_same_device, check_tensor
from . import backend, rivals
from .backend import tl, triton
from .custom_op import kernel_op

# ----------------------------------------------------------------------------------------
# Triton kernels
# ----------------------------------------------------------------------------------------

_LN2 = tl.constexpr(0.6931471805599453)


@backend.autotune(
    [
        triton.Config({"BLOCK_C": 1024}, num_warps=4),
        triton.Config({"BLOCK_C": 2048}, num_warps=8),
        triton.Config({"BLOCK_C": 4096}, num_warps=8),
        triton.Config({"BLOCK_C": 512}, num_warps=2),
    ],
    # A power-of-two bucket of the class count, not the count: counts close together share a tuning.
    key=["C_BUCKET", "TARGET_IS_INDEX"],
)
@triton.jit(do_not_specialize=["C_BUCKET"])
def _bce_forward_kernel(
    logits_ptr, target_ptr, grad_ptr, row_loss_ptr, C_units,
    logits_stride, target_stride, grad_stride,
    keep, add, inv_batch, C_BUCKET,
    TARGET_IS_INDEX: tl.constexpr, ACC: tl.constexpr, UNIT: tl.constexpr, BLOCK_C: tl.constexpr,
):
    # One program per sample; it writes that sample's share of the loss (its loss / N) and its row
    # of the gradient, so the host only sums the rows.
    # The class count and the row strides come in units of UNIT elements: 8 where they are all
    # multiples of 8, so the compiler knows that every row starts 16 bytes (of bf16) into an aligned
    # block and that the bounds mask is constant over 8 classes, and loads 128 bits at a time. A
    # launch marks only multiples of 16 as such, and 1000 classes are not one.
    C = C_units * UNIT
    row = tl.program_id(0).to(tl.int64)
    logits_ptr += row * logits_stride * UNIT
    grad_ptr += row * grad_stride * UNIT
    if TARGET_IS_INDEX:
        label = tl.load(target_ptr + row)
        # Checking labels on the host would make it wait for the device: a label outside [0, C)
        # makes this sample's loss NaN instead, and with TRITON_DEBUG=1 this assert stops the kernel.
        valid = (label >= 0) & (label < C)
        tl.device_assert(valid, "bce_with_logits: a class index is outside [0, C)")
        # Compared with the columns in 32 bits (64 cost three instructions a class); -1 matches none.
        label = tl.where(valid, label, -1).to(tl.int32)
    else:
        target_ptr += row * target_stride * UNIT
    total = tl.zeros((BLOCK_C,), dtype=ACC)
    for start in range(0, C, BLOCK_C):
        cols = start + tl.arange(0, BLOCK_C)
        inside = cols < C
        x = tl.load(logits_ptr + cols, mask=inside, other=0.0).to(ACC)
        if TARGET_IS_INDEX:
            t = (cols == label).to(ACC)
        else:
            t = tl.load(target_ptr + cols, mask=inside, other=0.0).to(ACC)
        t = t * keep + add
        # Stable for any |x|: exp only ever sees -|x|, so it cannot overflow. 1 + e is in [1, 2], where
        # the fast log2 errs by under 2^-22 (libdevice's precise log took 20 of 52 instructions a class).
        e = tl.exp(-tl.abs(x))
        loss = tl.maximum(x, 0.0) - x * t + backend.fast_log2(1.0 + e) * _LN2
        sigmoid = tl.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
        tl.store(grad_ptr + cols, ((sigmoid - t) * inv_batch).to(grad_ptr.dtype.element_ty), mask=inside)
        total += tl.where(inside, loss, 0.0)
    row_loss = tl.sum(total, axis=0) * inv_batch
    if TARGET_IS_INDEX:
        row_loss = tl.where(valid, row_loss, float("nan"))
    tl.store(row_loss_ptr + row, row_loss)


@triton.jit
def _scale_kernel(grad_ptr, scale_ptr, out_ptr, numel, BLOCK: tl.constexpr):
    # The loss's backward: the saved gradient times grad_output, read on the device (no sync).
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < numel
    scale = tl.load(scale_ptr)
    grad = tl.load(grad_ptr + offsets, mask=inside, other=0.0)
    tl.store(out_ptr + offsets, (grad * scale).to(out_ptr.dtype.element_ty), mask=inside)


# ----------------------------------------------------------------------------------------
# Pure-PyTorch reference: the specification the kernels are tested against.
# ----------------------------------------------------------------------------------------


def bce_with_logits_reference(
    input: torch.Tensor, target: torch.Tensor, *, label_smoothing: float = 0.0
) -> torch.Tensor:
    """One-hot targets, smoothing and ``F.binary_cross_entropy_with_logits``, summed / N, in fp32 or fp64."""
    compute_dtype = torch.float64 if input.dtype == torch.float64 else torch.float32
    N, C = input.shape
    if target.dtype.is_floating_point:
        dense = target.to(compute_dtype)
    else:
        dense = F.one_hot(target.long(), C).to(compute_dtype)
    dense = dense * (1.0 - label_smoothing) + label_smoothing / C
    loss = F.binary_cross_entropy_with_logits(input.to(compute_dtype), dense, reduction="sum")
    return loss / max(N, 1)


# ----------------------------------------------------------------------------------------
# Custom ops: torch.library registration, fake implementations and autograd
# ----------------------------------------------------------------------------------------


def _loss_dtype(logits: torch.Tensor) -> torch.dtype:
    return torch.float64 if logits.dtype == torch.float64 else torch.float32


@kernel_op("fastcore_ops::bce_with_logits")
def _bce_with_logits_op(
    logits: torch.Tensor, target: torch.Tensor, label_smoothing: float
) -> tuple[torch.Tensor, torch.Tensor]:
    N, C = logits.shape
    # The kernel walks classes with unit stride.
    logits = logits if logits.stride(1) == 1 else logits.contiguous()
    target = target if target.dim() == 1 or target.stride(1) == 1 else target.contiguous()
    grad = torch.empty_like(logits, memory_format=torch.contiguous_format)
    if not (N and C):  # nothing to launch: an empty batch, or no classes, loses nothing
        return logits.new_zeros((), dtype=_loss_dtype(logits)), grad
    # Two launches: the kernel writes every row's share of the loss and the gradient, then one sum.
    row_loss = torch.empty(N, dtype=_loss_dtype(logits), device=logits.device)
    target_is_index = not target.dtype.is_floating_point
    sizes = (C, logits.stride(0), 0 if target_is_index else target.stride(0), grad.stride(0))
    unit = 8 if all(size % 8 == 0 for size in sizes) else 1
    _bce_forward_kernel[(N,)](
        logits, target, grad, row_loss, *(size // unit for size in sizes),
        1.0 - label_smoothing, label_smoothing / C, 1.0 / N, backend.size_bucket(C),
        TARGET_IS_INDEX=target_is_index, ACC=backend.accumulator(logits.dtype), UNIT=unit,
    )
    return row_loss.sum(), grad


@_bce_with_logits_op.register_fake
def _(logits, target, label_smoothing):
    loss = logits.new_empty((), dtype=_loss_dtype(logits))
    return loss, torch.empty_like(logits, memory_format=torch.contiguous_format)


@kernel_op("fastcore_ops::bce_with_logits_backward")
def _bce_with_logits_backward_op(saved_grad: torch.Tensor, grad_loss: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(saved_grad)
    numel = saved_grad.numel()
    if numel:
        block = 4096
        _scale_kernel[(backend.cdiv(numel, block),)](saved_grad, grad_loss, out, numel, BLOCK=block)
    return out


@_bce_with_logits_backward_op.register_fake
def _(saved_grad, grad_loss):
    return torch.empty_like(saved_grad)


def _bce_setup_context(ctx, inputs, output):
    ctx.mark_non_differentiable(output[1])
    ctx.save_for_backward(output[1])
    # The saved gradient never receives a gradient: without this, autograd
    # would zero-fill an (N, C) buffer for it on every backward.
    ctx.set_materialize_grads(False)


def _bce_backward(ctx, grad_loss, _grad_of_grad):
    if grad_loss is None:  # not materialized: no gradient reached the loss
        return None, None, None
    (saved_grad,) = ctx.saved_tensors
    return _bce_with_logits_backward_op(saved_grad, grad_loss), None, None


_bce_with_logits_op.register_autograd(_bce_backward, setup_context=_bce_setup_context)


# ----------------------------------------------------------------------------------------
# Public functions
# ----------------------------------------------------------------------------------------


def _check_labels(target: torch.Tensor, num_classes: int, *, kernel_runs: bool) -> None:
    """Labels must index a class: raised at once on the CPU, where reading them makes nothing wait.

    Elsewhere the Triton kernel gives an out-of-range label's sample a NaN loss (no launch, no
    wait); the reference path asserts on the device, which needs no wait either.
    """
    message = f"target holds class indices outside [0, {num_classes}); labels must index a column of logits"
    if target.device.type == "cpu" and not torch.compiler.is_compiling():
        if target.numel():  # one op and two reads (2 us) where comparing and reducing took four ops (10 us)
            lowest, highest = torch.aminmax(target)
            if lowest.item() < 0 or highest.item() >= num_classes:
                raise ValueError(message)
    elif not kernel_runs:
        torch._assert_async(((target >= 0) & (target < num_classes)).all(), message)


def _check_inputs(input: torch.Tensor, target: torch.Tensor, label_smoothing: float) -> None:
    check_tensor("input", input, ndim=2)
    check_tensor("target", target, floating=False)
    check_same_device(input=input, target=target)
    N, C = input.shape
    if target.dtype.is_floating_point:
        if target.shape != input.shape:
            raise ValueError(
                f"a float target holds per-class probabilities and must have input's shape {tuple(input.shape)}, "
                f"got {tuple(target.shape)}"
            )
        if target.requires_grad:
            raise ValueError("target requires grad, but bce_with_logits treats targets as data; pass target.detach()")
    elif target.dtype in (torch.int64, torch.int32):
        if target.shape != (N,):
            raise ValueError(
                f"class-index targets must have shape (N,) = ({N},) to match input, got {tuple(target.shape)}"
            )
    else:
        raise TypeError(f"target must be int64 class indices or float probabilities, got dtype {target.dtype}")
    check_number("label_smoothing", label_smoothing, low=0, high=1)


def bce_with_logits(input: torch.Tensor, target: torch.Tensor, *, label_smoothing: float = 0.0) -> torch.Tensor:
    """Binary cross-entropy with logits, summed over classes and samples and divided by N.

    ``input`` and ``target`` are ``F.binary_cross_entropy_with_logits``'s first two
    arguments; the reduction is fixed (not that function's mean over N * C), so the rest
    is keyword-only and a ported call passing its ``weight`` positionally is refused.

    Args:
        input: (N, C) logits, any floating dtype; the loss is computed in fp32 (fp64 for fp64).
        target: (N,) int64 class indices, or (N, C) float probabilities (after MixUp, say). An
            index outside [0, C) raises ValueError for CPU tensors; on a GPU, where checking
            would make the host wait, that sample's loss is NaN (TRITON_DEBUG=1: a device assert).
        label_smoothing: s in [0, 1]; targets become target * (1 - s) + s / C.

    Returns a 0-d fp32 (fp64 for fp64 input) loss; an empty batch gives 0.

    Example:
        >>> logits = torch.randn(256, 1000, requires_grad=True)
        >>> loss = bce_with_logits(logits, torch.randint(0, 1000, (256,)), label_smoothing=0.1)
        >>> loss.backward()
    """
    _check_inputs(input, target, label_smoothing)
    target_kind = "probabilities" if target.dtype.is_floating_point else "labels"
    kernel_runs = rivals.kernel_runs("bce_with_logits", input, target=target_kind)
    if not target.dtype.is_floating_point and target.numel():
        _check_labels(target, input.shape[1], kernel_runs=kernel_runs)
    label_smoothing = float(label_smoothing)
    if kernel_runs:
        return _bce_with_logits_op(input, target, label_smoothing)[0]
    return bce_with_logits_reference(input, target, label_smoothing=label_smoothing)


def init_bce_bias_(classifier: torch.nn.Linear) -> torch.nn.Linear:
    """Set a classifier's bias to -log(C), the prior that matches ``bce_with_logits``.

    With bias -log(C) every class starts at probability sigmoid(-log C) ~ 1/C, so the
    first steps are not spent pushing C - 1 negatives down from 0.5.

    Example:
        >>> head = init_bce_bias_(torch.nn.Linear(2048, 1000))
        >>> round(head.bias[0].item(), 3)
        -6.908
    """
    if not isinstance(classifier, torch.nn.Linear):
        raise TypeError(f"classifier must be a torch.nn.Linear, got {type(classifier).__name__}")
    if classifier.bias is None:
        raise ValueError("classifier has no bias; build it with torch.nn.Linear(..., bias=True)")
    with torch.no_grad():
        classifier.bias.fill_(-math.log(classifier.out_features))
    return classifier
