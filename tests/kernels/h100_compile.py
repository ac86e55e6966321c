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

from fastcore_ops.kernels import bce, blurpool

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
        (blurpool._blurpool_backward_kernel, ("grad_out_ptr", "grad_in_ptr"), {"STRIDE": 2}),
        (blurpool._blur_maxpool_forward_kernel, ("x_ptr", "out_ptr"), {"KERNEL": 3, "STRIDE": 2, "PADDING": 1}),
        (blurpool._blur_maxpool_backward_kernel, ("grad_out_ptr", "grad_in_ptr"),
         {"KERNEL": 3, "STRIDE": 2, "PADDING": 1}),
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


def all_cases():
    yield from _blur_cases()
    yield from _bce_cases()


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
