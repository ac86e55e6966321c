"""Compile every Triton kernel, in every autotune config, for an H100 (sm_90), without a GPU, and read what the
compiler made of it.

The interpreter runs kernels as NumPy, so it cannot see what only the compiler sees:
unsupported constructs, constexpr mistakes, type errors in bf16. Triton compiles to PTX
and cubin without a device, so this catches them here. Each kernel is compiled as a launch
specialises it (see compile_case): without the launch's hints the compiler makes other
code, scalar loads where a launch gets 128-bit ones.

From each cubin cuobjdump reads the registers, stack and shared memory; for one config a
case (its ``representative``) also the SASS: the widths of its global loads and stores and
its main loop's instructions per element. ``--report FILE`` writes these as JSON, which
tests/kernels/test_h100_compile.py judges against docs/kernels.md ("What the compiler made").
Run as a script (the interpreter must be off): ``python -m tests.kernels.h100_compile``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

import torch
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.backends.nvidia.compiler import CUDABackend
from triton.compiler import ASTSource
from triton.runtime.autotuner import Autotuner

from fastcore_ops.kernels import alibi
from fastcore_ops.kernels import bce, blurpool
from fastcore_ops.kernels import ghost_batchnorm

H100 = GPUTarget("cuda", 90, 32)
# Shipped with Triton's NVIDIA backend, beside the ptxas that made the cubins.
CUOBJDUMP = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"


@dataclass(frozen=True)
class Streaming:
    """What one element of a memory-bound kernel moves: to count elements in its SASS, and to set its budget.

    ``loop_bytes``: the bytes its main loop stores per element (loads, where ``counts_loads``: a reduction
    stores nothing there), which turn the bytes of the loop's global stores into elements. ``dram_bytes``:
    the bytes it reads and writes in DRAM per element, which set its instruction budget (docs/kernels.md).
    """

    loop_bytes: int
    dram_bytes: float
    counts_loads: bool = False


@dataclass
class KernelCase:
    """One kernel with the argument types, and the specialisation, that a representative launch gives it."""

    kernel: object  # a JITFunction, or an Autotuner around one
    pointers: dict[str, str]  # pointer argument -> Triton element type, e.g. "bf16"
    constexprs: dict[str, object]
    floats: tuple[str, ...] = ()
    unit_strides: tuple[str, ...] = ()  # integer arguments a launch passes as 1 (Triton specialises them)
    divisible: tuple[str, ...] = ()  # integer arguments the representative launch passes as multiples of 16
    representative: int = 0  # the config whose SASS is read, an index into configs(): the one meant for the layout
    streaming: Streaming | None = None  # for a memory-bound kernel, what its elements move

    def configs(self):
        return getattr(self.kernel, "configs", [triton.Config({})])

    def jit_function(self):
        return self.kernel.fn if isinstance(self.kernel, Autotuner) else self.kernel

    def layout(self) -> str:
        """The layout compiled for: NCHW or NHWC (by the unit stride), planes or rows, or '' (no choice)."""
        if any(name.endswith("stride_c") for name in self.unit_strides):
            return "NHWC"
        if any(name.endswith("stride_w") for name in self.unit_strides):
            return "NCHW"
        if "PLANES" in self.constexprs:
            return "planes" if self.constexprs["PLANES"] else "rows"
        return ""

    def name(self) -> str:
        """The kernel, its layout and the constexprs that pick its code path (not its tile, nor ACC)."""
        picks = [f"{k}={v}" for k, v in self.constexprs.items()
                 if k not in ("ACC", "PLANES") and not k.startswith("BLOCK")]
        return " ".join([self.jit_function().__name__, *picks, self.layout()]).strip()


def _multiples_of_16(values: dict[str, int]) -> tuple[str, ...]:
    """The arguments whose value a launch marks divisible by 16 (Triton's ``tt.divisibility``)."""
    return tuple(name for name, value in values.items() if value % 16 == 0)


def _blur_cases():
    kernels = [
        (blurpool._blurpool_forward_kernel, ("x_ptr", "out_ptr"), {"STRIDE": 2}),
        (blurpool._blurpool_forward_kernel, ("x_ptr", "out_ptr"), {"STRIDE": 1}),  # and stride 1's backward
        (blurpool._blurpool_backward_kernel, ("grad_out_ptr", "grad_in_ptr"), {"STRIDE": 2}),
        (blurpool._blurpool_backward_kernel, ("grad_out_ptr", "grad_in_ptr"), {"STRIDE": 3}),
        (blurpool._blur_maxpool_forward_kernel, ("x_ptr", "out_ptr"), {"KERNEL": 3, "STRIDE": 2, "PADDING": 1}),
        (blurpool._max_pool_backward_kernel, ("grad_pooled_ptr", "grad_in_ptr"), {"KERNEL": 3, "PADDING": 1}),
    ]
    # The fused forward's other paths (stride 1, from 3, from 4 the rows no output reads, kernels too large to
    # keep input rows) and a 5 x 5 max pool's backward: one config each, not every config (some take 30 s).
    one_config = [
        (blurpool._blur_maxpool_forward_kernel, ("x_ptr", "out_ptr"), {"KERNEL": 3, "STRIDE": 1, "PADDING": 1}),
        (blurpool._blur_maxpool_forward_kernel, ("x_ptr", "out_ptr"), {"KERNEL": 3, "STRIDE": 3, "PADDING": 0}),
        (blurpool._blur_maxpool_forward_kernel, ("x_ptr", "out_ptr"), {"KERNEL": 2, "STRIDE": 4, "PADDING": 1}),
        (blurpool._blur_maxpool_forward_kernel, ("x_ptr", "out_ptr"), {"KERNEL": 7, "STRIDE": 2, "PADDING": 3}),
        (blurpool._max_pool_backward_kernel, ("grad_pooled_ptr", "grad_in_ptr"), {"KERNEL": 5, "PADDING": 2}),
    ]
    for every_config, cases in ((True, kernels), (False, one_config)):
        for kernel, data_pointers, constexprs in cases:
            pointers = {name: "bf16" for name in data_pointers}
            names = kernel.fn.arg_names
            if "argmax_ptr" in names:
                pointers["argmax_ptr"] = "u8"
            for layout_stride, config in (("stride_w", kernel.configs[0]), ("stride_c", kernel.configs[-1])):
                unit = tuple(n for n in names if n.endswith(layout_stride))  # NCHW, then NHWC
                if every_config:
                    yield KernelCase(kernel, pointers, {**constexprs, "ACC": tl.float32}, unit_strides=unit)
                else:  # the bare kernel with the first config (NCHW) or the last (NHWC), of the default 4 warps
                    assert config.num_warps == 4
                    yield KernelCase(kernel.fn, pointers, {**constexprs, **config.kwargs, "ACC": tl.float32},
                                     unit_strides=unit)


# The blur kernels' representative launches, from ResNet-50 with BlurPool at batch 256 in bf16: the blur before
# the first stride-2 conv (128 channels of 56 x 56) and the stem's blur max pool (64 channels of 112 x 112).
_BLUR_IMAGES = {"_blurpool_forward_kernel": (128, 56), "_blurpool_backward_kernel": (128, 56),
                "_blur_maxpool_forward_kernel": (64, 112), "_max_pool_backward_kernel": (64, 112)}
# The image whose strides each prefix of a kernel's stride arguments holds.
_BLUR_STRIDES = {
    "_blurpool_forward_kernel": {"stride": "input", "out_stride": "output"},
    "_blurpool_backward_kernel": {"stride": "output", "in_stride": "input"},
    "_blur_maxpool_forward_kernel": {"stride": "input", "out_stride": "output", "arg_stride": "pooled"},
    "_max_pool_backward_kernel": {"stride": "pooled", "arg_stride": "pooled", "in_stride": "input"},
}


def _blur_launch(case: KernelCase) -> dict[str, int]:
    """The integer arguments of a blur kernel's representative launch, in the case's layout."""
    name = case.jit_function().__name__
    channels, size = _BLUR_IMAGES[name]
    pooled = size + 2 * case.constexprs.get("PADDING", 0) - case.constexprs.get("KERNEL", 1) + 1
    sides = {"input": size, "pooled": pooled, "output": (pooled - 1) // case.constexprs.get("STRIDE", 1) + 1}
    values = {"C": channels, "H": size, "W": size, "Hp": pooled, "Wp": pooled, "Ho": sides["output"],
              "Wo": sides["output"]}
    for prefix, image in _BLUR_STRIDES[name].items():
        side = sides[image]
        if case.layout() == "NHWC":
            strides = (side * side * channels, 1, side * channels, channels)
        else:
            strides = (channels * side * side, side * side, side, 1)
        values.update({f"{prefix}_{dim}": stride for dim, stride in zip("nchw", strides)})
    return {name: value for name, value in values.items() if name in case.jit_function().arg_names}


def _blur_streaming(case: KernelCase) -> Streaming:
    """What each output pixel of a blur kernel moves (the input's pixel for the backward kernels), in bf16."""
    name = case.jit_function().__name__
    stride = case.constexprs.get("STRIDE", 1)
    if name == "_blurpool_forward_kernel":  # stride^2 inputs read, one output written
        return Streaming(2, 2 * stride**2 + 2)
    if name == "_blurpool_backward_kernel":  # one input gradient written, 1 / stride^2 output gradients read
        return Streaming(2, 2 + 2 / stride**2)
    if name == "_blur_maxpool_forward_kernel":  # and the argmax bytes of the pooled pixels some output reads
        argmax = min(stride, 3) ** 2
        return Streaming(2 + argmax, 2 * stride**2 + 2 + argmax)
    return Streaming(2, 2 + 1 + 2)  # the max pool's backward: a pooled gradient and argmax byte an input pixel


def _blur_cases_as_launched():
    """The blur cases with their representative launch's hints, the config meant for their layout (the last
    for NHWC, as _blur_cases picks) and what their elements move."""
    for case in _blur_cases():
        yield replace(case, divisible=_multiples_of_16(_blur_launch(case)),
                      representative=-1 if case.layout() == "NHWC" else 0, streaming=_blur_streaming(case))


def _bce_cases():
    # ResNet-50's head at batch 256: 1000 classes, bf16 logits, rows 1000 apart (not a multiple of 16).
    # The class count and row strides are passed in units of 8 elements (1000 = 8 x 125), as the op does
    # where they allow.
    samples, classes, unit = 256, 1000, 8
    for target_is_index, target_type in ((True, "i64"), (False, "fp32")):
        launch = {"C_units": classes // unit, "logits_stride": classes // unit,
                  "target_stride": 0 if target_is_index else classes // unit, "grad_stride": classes // unit}
        yield KernelCase(
            bce._bce_forward_kernel,
            {"logits_ptr": "bf16", "target_ptr": target_type, "grad_ptr": "bf16", "row_loss_ptr": "fp32"},
            {"TARGET_IS_INDEX": target_is_index, "ACC": tl.float32, "UNIT": unit},
            floats=("keep", "add", "inv_batch"), divisible=_multiples_of_16(launch),
            # Reads a logit (and a float target) and writes a gradient per element.
            streaming=Streaming(2, 2 + 2 if target_is_index else 2 + 4 + 2),
        )
    yield KernelCase(
        bce._scale_kernel, {"grad_ptr": "bf16", "scale_ptr": "fp32", "out_ptr": "bf16"}, {"BLOCK": 4096},
        divisible=_multiples_of_16({"numel": samples * classes}), streaming=Streaming(2, 2 + 2),
    )


def _ghost_batchnorm_launch(planes: bool) -> dict[str, int]:
    """The sizes a launch passes for ResNet-50's first stage at batch 256 (64 channels of 56 x 56, ghost batch 32)."""
    layout = torch.contiguous_format if planes else torch.channels_last
    plan = ghost_batchnorm._plan(torch.empty(256, 64, 56, 56, device="meta", memory_format=layout), 32)
    assert plan.planes == planes
    return {"N": plan.N, "C": plan.C, "HW": plan.HW, "G": plan.G, "S": plan.splits, "SPLIT": plan.split_units}


def _ghost_batchnorm_cases():
    gb = ghost_batchnorm
    data, stats = "bf16", "fp32"  # bf16 activations and parameters, fp32 statistics buffers
    # Per element: the statistics and backward sums read x (and g) and store nothing in their loops; normalize
    # reads x and writes y; backward reads g and x and writes grad_x.
    kernels = [
        (gb._forward_stats, {"x_ptr": data, "partial_ptr": stats}, {}, Streaming(2, 2, counts_loads=True)),
        (gb._forward_normalize, {"x_ptr": data, "out_ptr": data, "weight_ptr": data, "bias_ptr": data,
                                 "partial_ptr": stats, "mean_ptr": stats, "var_ptr": stats},
         {"HAS_WEIGHT": True, "HAS_BIAS": True}, Streaming(2, 4)),
        (gb._backward_sums, {"grad_ptr": data, "x_ptr": data, "mean_ptr": stats, "var_ptr": stats,
                             "partial_ptr": stats}, {}, Streaming(4, 4, counts_loads=True)),
        (gb._backward, {"grad_ptr": data, "x_ptr": data, "weight_ptr": data, "mean_ptr": stats,
                        "var_ptr": stats, "partial_ptr": stats, "grad_x_ptr": data, "grad_weight_ptr": stats,
                        "grad_bias_ptr": stats}, {"HAS_WEIGHT": True}, Streaming(2, 6)),
    ]
    # The layouts are not strides here but the constexpr PLANES (NCHW planes, else rows of
    # contiguous channels), each with its own autotuner and tile configs.
    for tuned, pointers, constexprs, streaming in kernels:
        for planes in (False, True):
            yield KernelCase(tuned[planes], pointers, {**constexprs, "PLANES": planes, "ACC": tl.float32},
                             floats=("eps",), divisible=_multiples_of_16(_ghost_batchnorm_launch(planes)),
                             streaming=streaming)
    # Its N, C, HW and G, all multiples of 16 at that launch.
    sizes = {name: value for name, value in _ghost_batchnorm_launch(False).items() if name in ("N", "C", "HW", "G")}
    yield KernelCase(
        gb._running_stats_kernel,
        {"running_mean_ptr": stats, "running_var_ptr": stats, "mean_ptr": stats, "var_ptr": stats},
        {"ACC": tl.float32, "BLOCK_C": gb._RUNNING_BLOCK_C, "BLOCK_K": gb._RUNNING_BLOCK_K},
        floats=("momentum_high", "momentum_low"), divisible=_multiples_of_16(sizes),
    )


def _alibi_launch(names: list[str], head_dim: int) -> dict[str, int]:
    """The integer arguments of GPT-2 small's attention (12 heads, 1024 positions) at this head dim, on
    contiguous (B, H, T, D) tensors: every stride but the head dim's, which is 1."""
    heads, length = 12, 1024
    strides = {"b": heads * length * head_dim, "h": length * head_dim, "t": head_dim}
    values = {"H": heads, "n_pow2": alibi._largest_power_of_two_at_most(heads), "Tq": length, "Tk": length,
              "TQ_BUCKET": length, "TK_BUCKET": length}
    values.update({name: strides[name[-1]] for name in names if name.startswith("stride_") and name[-1] in strides})
    return {name: value for name, value in values.items() if name in names}


def _alibi_cases():
    data, stats = "bf16", "fp32"  # bf16 q, k, v and gradients; fp32 slopes (when given), LSE and delta
    pointers = {
        "q_ptr": data, "k_ptr": data, "v_ptr": data, "out_ptr": data, "do_ptr": data,
        "dq_ptr": data, "dk_ptr": data, "dv_ptr": data,
        "slopes_ptr": stats, "lse_ptr": stats, "delta_ptr": stats,
    }
    attention = (alibi._alibi_forward_kernel, alibi._alibi_backward_dkdv_kernel, alibi._alibi_backward_dq_kernel)
    # Head dim 64 needs no head-dim masks, 40 (padded to 64) does; causal and not. Slopes
    # computed in the kernels (the default: slopes_ptr is then q, never read) or given.
    for head_dim, causal, has_slopes in ((64, True, False), (64, False, False), (40, True, False), (64, True, True)):
        constexprs = {"HEAD_DIM": head_dim, "HEAD_DIM_PADDED": 64, "CAUSAL": causal, "HAS_SLOPES": has_slopes,
                      "INPUT_PRECISION": "tf32"}
        for kernel in attention:
            names = kernel.fn.arg_names
            kernel_pointers = {n: t for n, t in pointers.items() if n in names}
            if not has_slopes:
                kernel_pointers["slopes_ptr"] = data
            yield KernelCase(
                kernel, kernel_pointers, constexprs,
                floats=("qk_scale", "scale"),
                unit_strides=tuple(n for n in names if n.startswith("stride_") and n.endswith("d")),  # head dim
                divisible=_multiples_of_16(_alibi_launch(names, head_dim)),
            )
    for head_dim in (64, 40):
        yield KernelCase(
            alibi._alibi_backward_preprocess_kernel, {"out_ptr": data, "do_ptr": data, "delta_ptr": stats},
            {"HEAD_DIM": head_dim, "HEAD_DIM_PADDED": 64, "BLOCK_M": alibi._PREPROCESS_BLOCK_M},
            unit_strides=("stride_od", "stride_dod"),
            divisible=_multiples_of_16(_alibi_launch(alibi._alibi_backward_preprocess_kernel.arg_names, head_dim)),
        )


def all_cases():
    yield from _blur_cases_as_launched()
    yield from _bce_cases()
    yield from _ghost_batchnorm_cases()
    yield from _alibi_cases()


def divisibility_attrs(fn, names) -> dict:
    """``ASTSource``'s ``attrs`` marking ``names`` divisible by 16, as a launch marks them.

    A launch specialises each argument to a code ("D": a 16-byte aligned pointer or a multiple of 16) that the
    backend's ``parse_attr`` turns into attributes, keyed by the argument's path, a tuple of its index
    (JITFunction._pack_args). Triton 3.6 and 3.8 agree on both; asking the backend keeps this in step with it.
    """
    hint = CUDABackend.parse_attr("D")
    return {(fn.arg_names.index(name),): hint for name in names}


def compile_case(case: KernelCase, config: triton.Config):
    """Compile one config of a case as its representative launch specialises it."""
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
    # Every pointer is 16-byte aligned (torch's allocations are), and the launch's multiples of 16 are marked,
    # except the arguments that the kernel exempts from specialisation (its autotuning buckets).
    exempt = {p.name for p in fn.params if p.do_not_specialize or p.do_not_specialize_on_alignment}
    hinted = [name for name in (*case.pointers, *case.divisible) if name not in exempt]
    source = ASTSource(fn, signature, constexprs, divisibility_attrs(fn, hinted))
    return triton.compile(source, target=H100, options={"num_warps": config.num_warps, "num_stages": config.num_stages})


def config_label(case: KernelCase, config: triton.Config) -> str:
    """A config as its tile (the case's, for a bare kernel), warps and stages: "BLOCK_C=64 ... warps=4 stages=3"."""
    tile = {**{k: v for k, v in case.constexprs.items() if k.startswith("BLOCK")}, **config.kwargs}
    warps_and_stages = (f"warps={config.num_warps}", f"stages={config.num_stages}")
    return " ".join([*(f"{k}={v}" for k, v in tile.items()), *warps_and_stages])


def h100_ctas_per_sm(registers: int, warps: int, shared: int) -> int:
    """The CTAs an H100 SM holds at once, by the CUDA occupancy calculator's rules for sm_90.

    An SM has 64K registers, handed to warps in units of 256; 64 warps; 32 CTAs; 228 KB of shared memory,
    of which a CTA takes 1 KB more than it asks and at most 227 KB.
    """
    if shared > 227 * 1024:
        return 0
    registers_per_warp = -(-registers * 32 // 256) * 256
    return min(32, 64 // warps, 65536 // registers_per_warp // warps, 228 * 1024 // (shared + 1024))


# One instruction of cuobjdump's SASS: its address, then its opcode after any predicate.
_SASS_LINE = re.compile(r"/\*([0-9a-f]+)\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")
# The suffixes that give an LDG's or STG's width in bits; without one it moves 32 (LTC128B is a cache hint).
_WIDTHS = {"128": 128, "64": 64, "U16": 16, "S16": 16, "U8": 8, "S8": 8}


def _instructions(sass: str) -> list[tuple[int, str, str]]:
    """(address, opcode, operands) of each instruction, without the NOPs that pad the code."""
    return [(int(m[1], 16), m[2], m[3]) for m in _SASS_LINE.finditer(sass) if m[2] != "NOP"]


def _accesses(instructions, kind: str) -> Counter:
    """How many global accesses of ``kind`` (LDG or STG) move each width, in bits per thread."""
    widths = Counter()
    for _, opcode, _ in instructions:
        if opcode.startswith(kind):
            widths[next((_WIDTHS[part] for part in opcode.split(".")[1:] if part in _WIDTHS), 32)] += 1
    return widths


def _bytes(instructions, kind: str) -> int:
    """The bytes a thread's accesses of ``kind`` move, once each."""
    return sum(width * count for width, count in _accesses(instructions, kind).items()) // 8


def _innermost_loops(instructions) -> list[list]:
    """Each innermost loop's instructions: from a backward branch's target to the branch, holding no other loop."""
    spans = []
    for address, opcode, operands in instructions:
        target = re.search(r"0x([0-9a-f]+)", operands)
        if opcode.startswith("BRA") and target and int(target[1], 16) < address:
            spans.append((int(target[1], 16), address))
    innermost = [s for s in spans if not any(o != s and s[0] <= o[0] and o[1] <= s[1] for o in spans)]
    return [[i for i in instructions if start <= i[0] <= end] for start, end in innermost]


def _widths(counter: Counter) -> dict[str, int]:
    """Access counts by width, keyed as JSON keys them."""
    return {str(width): count for width, count in sorted(counter.items())}


def read_sass(sass: str, streaming: Streaming | None) -> dict:
    """The widths of a kernel's global loads and stores and, for a memory-bound one, its main loop's.

    The main loop is the innermost loop that moves the most of the bytes ``streaming`` counts (the whole kernel
    where no loop moves any: it was unrolled, or there is none); those bytes over the bytes an element moves
    give the elements it handles per thread, and its instructions over them the instructions per element.
    """
    instructions = _instructions(sass)
    made = {"instructions": len(instructions), "loads": _widths(_accesses(instructions, "LDG")),
            "stores": _widths(_accesses(instructions, "STG"))}
    if streaming is not None:
        kind = "LDG" if streaming.counts_loads else "STG"
        body = max(_innermost_loops(instructions), key=lambda loop: _bytes(loop, kind), default=[])
        body = body if _bytes(body, kind) else instructions
        elements = _bytes(body, kind) / streaming.loop_bytes
        made.update(loop_instructions=len(body), loop_loads=_widths(_accesses(body, "LDG")),
                    loop_stores=_widths(_accesses(body, "STG")), elements_per_thread=elements,
                    instructions_per_element=round(len(body) / elements, 1), dram_bytes=streaming.dram_bytes)
    return made


def _cuobjdump(cubin: bytes, flag: str) -> str:
    """cuobjdump's output for a cubin, which it reads from a file."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as file:
        file.write(cubin)
        file.flush()
        return subprocess.run([str(CUOBJDUMP), flag, file.name], capture_output=True, text=True, check=True).stdout


def read_made(case: KernelCase, config: triton.Config, compiled, sass: bool) -> dict:
    """Registers, spills (stack and local bytes), shared memory and CTAs per SM of one compiled config; with
    ``sass``, what read_sass reads too."""
    usage = _cuobjdump(compiled.asm["cubin"], "--dump-resource-usage")
    registers, stack, local = (int(re.search(rf"\b{field}:(\d+)", usage)[1]) for field in ("REG", "STACK", "LOCAL"))
    shared = compiled.metadata.shared
    made = {"case": case.name(), "kernel": case.jit_function().__name__, "layout": case.layout(),
            "config": config_label(case, config), "num_warps": config.num_warps, "registers": registers,
            "spill_bytes": stack + local, "shared": shared,
            "ctas_per_sm": h100_ctas_per_sm(registers, config.num_warps, shared), "representative": sass}
    if sass:
        made.update(read_sass(_cuobjdump(compiled.asm["cubin"], "--dump-sass"), case.streaming))
    return made


_CASES: list[KernelCase] = []  # filled by main before its pool forks, and indexed by the workers


def _compile_and_read(job: tuple[int, int]) -> tuple[str, dict | None]:
    """Compile a (case, config) pair of indices: its line of the log, and what was made (None if the compile
    failed or cuobjdump is missing)."""
    case = _CASES[job[0]]
    configs = case.configs()
    config = configs[job[1]]
    label = f"{case.name()} {config_label(case, config)}"
    start = time.perf_counter()
    try:
        compiled = compile_case(case, config)
    except Exception as error:  # report every failing kernel, not just the first
        return f"FAIL {label}: {type(error).__name__}: {error}", None
    made = None
    if CUOBJDUMP.exists():
        made = read_made(case, config, compiled, sass=job[1] == case.representative % len(configs))
    resources = f" registers={made['registers']} spilled={made['spill_bytes']}B" if made else ""
    return f"ok   {label} shared={compiled.metadata.shared}B{resources} {time.perf_counter() - start:.1f}s", made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Compile every Triton kernel for an H100 and read what was made.")
    parser.add_argument("--report", type=Path, help="write what the compiler made, as JSON, to this file")
    args = parser.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET") == "1":
        print("run with the interpreter off (unset TRITON_INTERPRET and FASTCORE_OPS_INTERPRET)")
        return 2
    if os.environ.get("FASTCORE_OPS_AUTOTUNE") == "0":
        print("run with autotuning on (unset FASTCORE_OPS_AUTOTUNE): with it off, each kernel keeps its first config")
        return 2
    if not CUOBJDUMP.exists():
        print(f"cuobjdump is missing ({CUOBJDUMP}): compiling only, registers, spills and SASS not read")
    _CASES[:] = all_cases()
    jobs = [(i, j) for i, case in enumerate(_CASES) for j in range(len(case.configs()))]
    failures, made = 0, []
    # Compiling is single-threaded and the configs independent: one process a core ("fork": the workers
    # inherit _CASES, and the parent has compiled nothing whose state they could copy).
    with multiprocessing.get_context("fork").Pool(len(os.sched_getaffinity(0))) as pool:
        for line, config_made in pool.imap(_compile_and_read, jobs):
            print(line, flush=True)
            failures += line.startswith("FAIL")
            made += [config_made] if config_made else []
    if args.report:
        args.report.write_text(json.dumps({"triton": triton.__version__,
                                           "cuobjdump": str(CUOBJDUMP) if CUOBJDUMP.exists() else None,
                                           "made": made}, indent=1))
    print(f"{failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
