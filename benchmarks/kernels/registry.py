"""Every kernel's declaration (:class:`benchmarks.kernels.KernelSpec`), in one tuple that the checks and
benchmarks read: ``python -m benchmarks.kernels``, ``benchmarks.kernels.host_side``, the GPU check's
correctness and speed parts, ``tests/kernels/test_host_side.py``, the sm_90 compile check
(``tests/kernels/h100_compile.py``) and docs/kernels.md's table (``benchmarks.kernels.declarations``).

    >>> [spec.name for spec in KERNELS]
    ['blurpool2d', 'blur_maxpool2d', 'bce_with_logits', 'ghost_batch_norm', 'alibi_attention']
"""

from __future__ import annotations

from . import KernelSpec, alibi, bce, blurpool, ghost_batchnorm

KERNELS: tuple[KernelSpec, ...] = (blurpool.BLURPOOL, blurpool.BLUR_MAXPOOL, bce.SPEC, ghost_batchnorm.SPEC, alibi.SPEC)
