"""Triton kernels for the operations efficient training adds or makes hot.

Each kernel runs as Triton on CUDA tensors and as its pure-PyTorch reference elsewhere
(see :mod:`fastcore_ops.kernels.backend`). Triton is optional: without it (macOS, Windows,
CPU-only images) CPU tensors still run the references. Each public function takes its
closest PyTorch counterpart's arguments (``F.batch_norm``, ``F.scaled_dot_product_attention``,
``F.max_pool2d``, ``F.binary_cross_entropy_with_logits``).
"""

from . import backend  # noqa: F401  (first: it settles Triton's interpreter mode)
from .alibi import alibi_attention, alibi_slopes
from .bce import bce_with_logits, init_bce_bias_
from .blur_maxpool import blur_maxpool2d
from .blurpool import blurpool2d
from .ghost_batchnorm import ghost_batch_norm

__all__ = [
    "alibi_attention", "alibi_slopes", "bce_with_logits", "blur_maxpool2d", "blurpool2d", "ghost_batch_norm",
    "init_bce_bias_",
]
