"""Compile every Triton kernel, in every autotune config, for an H100 (sm_90), without a GPU.

The interpreter runs kernels as NumPy, so it cannot see what only the compiler sees:
unsupported constructs, constexpr mistakes, type errors in bf16. Triton compiles to PTX
and cubin without a device, so this catches them here. Run as a script (the interpreter
must be off): ``python -m tests.kernels.h100_compile``.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.runtime.autotuner import Autotuner

from fastcore_ops.kernels import alibi
from fastcore_ops.kernels import bce, blurpool
from fastcore_ops.kernels import ghost_batchnorm

H100 = GPUTarget("cuda", 90, 32)


@dataclass
class KernelCase:
    """One kernel with the argument types a real launch gives it."""

    kernel: object  # a JITFunction, or an Autotuner around one
    pointers: dict[str, str]  # pointer argument -> Triton element type, e.g. "bf16"
    constexprs: dict[str, object]
    floats: tuple[str, ...] = ()
    unit_strides: tuple[str, ...] = ()  # integer arguments a launch passes as 1 (Triton specialises them)

    def configs(self):
        return getattr(self.kernel, "configs", [triton.Config({})])

    def jit_function(self):
        return self.kernel.fn if isinstance(self.kernel, Autotuner) else self.kernel


def _blur_cases():
    kernels = [
        (blurpool._blurpool_forward_kernel, ("x_ptr", "out_ptr"), {"STRIDE": 2}),
        (blurpool._blurpool_forward_kernel, ("x_ptr", "out_ptr"), {"STRIDE": 1}),  # and stride 1's backward
        (blurpool._blurpool_backward_kernel, ("grad_out_ptr", "grad_in_ptr"), {"STRIDE": 2}),
        (blurpool._blurpool_backward_kernel, ("grad_out_ptr", "grad_in_ptr"), {"STRIDE": 3}),
        (blurpool._blur_maxpool_forward_kernel, ("x_ptr", "out_ptr"), {"KERNEL": 3, "STRIDE": 2, "PADDING": 1}),
        (blurpool._max_pool_backward_kernel, ("grad_pooled_ptr", "grad_in_ptr"), {"KERNEL": 3, "PADDING": 1}),
    ]
    for kernel, data_pointers, constexprs in kernels:
        pointers = {name: "bf16" for name in data_pointers}
        names = kernel.fn.arg_names
        if "argmax_ptr" in names:
            pointers["argmax_ptr"] = "u8"
        for layout_stride in ("stride_w", "stride_c"):  # NCHW, then NHWC
            unit = tuple(n for n in names if n.endswith(layout_stride))
            yield KernelCase(kernel, pointers, {**constexprs, "ACC": tl.float32}, unit_strides=unit)


def _bce_cases():
    for target_is_index, target_type in ((True, "i64"), (False, "fp32")):
        yield KernelCase(
            bce._bce_forward_kernel,
            {"logits_ptr": "bf16", "target_ptr": target_type, "grad_ptr": "bf16", "row_loss_ptr": "fp32"},
            {"TARGET_IS_INDEX": target_is_index, "ACC": tl.float32},
            floats=("keep", "add", "inv_batch"),
        )
    yield KernelCase(
        bce._scale_kernel, {"grad_ptr": "bf16", "scale_ptr": "fp32", "out_ptr": "bf16"}, {"BLOCK": 4096}
    )


def _ghost_batchnorm_cases():
    gb = ghost_batchnorm
    data, stats = "bf16", "fp32"  # bf16 activations and parameters, fp32 statistics buffers
    kernels = [
        (gb._forward_stats, {"x_ptr": data, "partial_ptr": stats}, {}),
        (gb._forward_normalize, {"x_ptr": data, "out_ptr": data, "weight_ptr": data, "bias_ptr": data,
                                 "partial_ptr": stats, "mean_ptr": stats, "var_ptr": stats},
         {"HAS_WEIGHT": True, "HAS_BIAS": True}),
        (gb._backward_sums, {"grad_ptr": data, "x_ptr": data, "mean_ptr": stats, "var_ptr": stats,
                             "partial_ptr": stats}, {}),
        (gb._backward, {"grad_ptr": data, "x_ptr": data, "weight_ptr": data, "mean_ptr": stats,
                        "var_ptr": stats, "partial_ptr": stats, "grad_x_ptr": data, "grad_weight_ptr": stats,
                        "grad_bias_ptr": stats}, {"HAS_WEIGHT": True}),
    ]
    # The layouts are not strides here but the constexpr PLANES (NCHW planes, else rows of
    # contiguous channels), each with its own autotuner and tile configs.
    for tuned, pointers, constexprs in kernels:
        for planes in (False, True):
            yield KernelCase(tuned[planes], pointers, {**constexprs, "PLANES": planes, "ACC": tl.float32},
                             floats=("eps",))
    yield KernelCase(
        gb._running_stats_kernel,
        {"running_mean_ptr": stats, "running_var_ptr": stats, "mean_ptr": stats, "var_ptr": stats},
        {"ACC": tl.float32, "BLOCK_C": gb._RUNNING_BLOCK_C, "BLOCK_K": gb._RUNNING_BLOCK_K},
        floats=("momentum_high", "momentum_low"),
    )


def _alibi_cases():
    data, stats = "bf16", "fp32"  # bf16 q, k, v and gradients; fp32 slopes, LSE and delta
    pointers = {
        "q_ptr": data, "k_ptr": data, "v_ptr": data, "out_ptr": data, "do_ptr": data,
        "dq_ptr": data, "dk_ptr": data, "dv_ptr": data,
        "slopes_ptr": stats, "lse_ptr": stats, "delta_ptr": stats,
    }
    attention = (alibi._alibi_forward_kernel, alibi._alibi_backward_dkdv_kernel, alibi._alibi_backward_dq_kernel)
    # Head dim 64 needs no head-dim masks, 40 (padded to 64) does; causal and not.
    for head_dim, causal in ((64, True), (64, False), (40, True)):
        constexprs = {"HEAD_DIM": head_dim, "HEAD_DIM_PADDED": 64, "CAUSAL": causal, "INPUT_PRECISION": "tf32"}
        for kernel in attention:
            names = kernel.fn.arg_names
            yield KernelCase(
                kernel, {n: t for n, t in pointers.items() if n in names}, constexprs,
                floats=("qk_scale", "scale"),
                unit_strides=tuple(n for n in names if n.startswith("stride_") and n.endswith("d")),  # head dim
            )
    for head_dim in (64, 40):
        yield KernelCase(
            alibi._alibi_backward_preprocess_kernel, {"out_ptr": data, "do_ptr": data, "delta_ptr": stats},
            {"HEAD_DIM": head_dim, "HEAD_DIM_PADDED": 64, "BLOCK_M": alibi._PREPROCESS_BLOCK_M},
            unit_strides=("stride_od", "stride_dod"),
        )


def all_cases():
    yield from _blur_cases()
    yield from _bce_cases()
    yield from _ghost_batchnorm_cases()
    yield from _alibi_cases()


def compile_case(case: KernelCase, config: triton.Config):
    fn = case.jit_function()
    constexprs = {**case.constexprs, **config.kwargs, **{name: 1 for name in case.unit_strides}}
    signature = {}
    for name in fn.arg_names:
        if name in constexprs:
            signature[name] = "constexpr"
        elif name in case.pointers:
            signature[name] = "*" + case.pointers[name]
        elif name in case.floats:
            signature[name] = "fp32"
        else:
            signature[name] = "i32"
    source = ASTSource(fn, signature, constexprs=constexprs)
    return triton.compile(source, target=H100, options={"num_warps": config.num_warps})


def main() -> int:
    if os.environ.get("TRITON_INTERPRET") == "1":
        print("run with the interpreter off (unset TRITON_INTERPRET and FASTCORE_OPS_INTERPRET)")
        return 2
    if os.environ.get("FASTCORE_OPS_AUTOTUNE") == "0":
        print("run with autotuning on (unset FASTCORE_OPS_AUTOTUNE): with it off, each kernel keeps its first config")
        return 2
    failures = 0
    for case in all_cases():
        for config in case.configs():
            label = f"{case.jit_function().__name__} {config.kwargs} warps={config.num_warps} unit={case.unit_strides}"
            start = time.perf_counter()
            try:
                compiled = compile_case(case, config)
            except Exception as error:  # report every failing kernel, not just the first
                failures += 1
                print(f"FAIL {label}: {type(error).__name__}: {error}")
                continue
            shared = compiled.metadata.shared
            print(f"ok   {label} shared={shared}B {time.perf_counter() - start:.1f}s")
    print(f"{failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
