"""Compile every Triton kernel, in every autotune config, for an H100 (sm_90), without a GPU, and read what the
compiler made of it.

The interpreter runs kernels as NumPy, so it cannot see what only the compiler sees:
unsupported constructs, constexpr mistakes, type errors in bf16. Triton compiles to PTX
and cubin without a device, so this catches them here. Each kernel is compiled as a launch
specialises it (see compile_case): without the launch's hints the compiler makes other
code, scalar loads where a launch gets 128-bit ones. The kernels and their launches come from
each kernel's declaration (``compile_cases`` in benchmarks/kernels/<kernel>.py).

From each cubin cuobjdump reads the registers, stack and shared memory; for one config a
case (its ``representative``) also the SASS: the widths of its global loads and stores and
its main loop's instructions per element (or, where a loop's trips would be needed to count them, why
not: see _main_loop). ``--report FILE`` writes these as JSON, which
tests/kernels/test_h100_compile.py judges against docs/kernels.md ("What the compiler made").
Run as a script (the interpreter must be off): ``python -m tests.kernels.h100_compile``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import multiprocessing
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.backends.nvidia.compiler import CUDABackend
from triton.compiler import ASTSource

from benchmarks.kernels.compile_cases import KernelCase, Streaming

H100 = GPUTarget("cuda", 90, 32)
# Shipped with Triton's NVIDIA backend, beside the ptxas that made the cubins.
CUOBJDUMP = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"


def all_cases(specs) -> list[KernelCase]:
    """The compile cases of every declaration in ``specs``, in order."""
    return [case for spec in specs for case in spec.compile_cases()]


def load_specs(names: list[str]) -> tuple:
    """The declarations named ``module:NAME`` (a kernel declared outside the registry, as the toy kernel is);
    with no names, every kernel of benchmarks/kernels/registry.py."""
    if not names:
        from benchmarks.kernels.registry import KERNELS

        return KERNELS
    specs = []
    for name in names:
        module, _, attribute = name.partition(":")
        try:
            specs.append(getattr(importlib.import_module(module), attribute))
        except (ImportError, AttributeError) as error:
            raise ValueError(f"--spec {name}: {error}; name a declaration as module:NAME") from None
    return tuple(specs)


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


def sass_loops(instructions) -> list[tuple[int, int]]:
    """The address ranges of the loops in ``instructions``: each from a backward branch's target (the loop's
    head) to the last branch back to it, in order of head. ``BRA 0x10`` at 0x30 makes the loop (0x10, 0x30)."""
    ends = {}
    for address, opcode, operands in instructions:
        target = re.search(r"0x([0-9a-f]+)", operands)
        if opcode.startswith("BRA") and target and int(target[1], 16) < address:
            head = int(target[1], 16)
            ends[head] = max(ends.get(head, address), address)
    return sorted(ends.items())


def _within(instructions, loop: tuple[int, int]) -> list:
    """The instructions of ``instructions`` inside the address range ``loop``."""
    return [i for i in instructions if loop[0] <= i[0] <= loop[1]]


def _home(address: int, loops) -> tuple[int, int] | None:
    """The innermost of ``loops`` that holds ``address`` (None outside them all)."""
    return min((loop for loop in loops if loop[0] <= address <= loop[1]), key=lambda loop: loop[1] - loop[0],
               default=None)


def _main_loop(instructions, kind: str) -> tuple[list, str | None]:
    """The main loop's instructions (the whole kernel's where it has none), and why they cannot be read as
    what one pass issues, or None where they can.

    The loops that move bytes are those whose own code (outside the loops within them) holds accesses of
    ``kind``; the main loop is the one of them that moves the most. Read once, a loop's body is one pass
    only where no other loop shares its range: a loop within it runs an unknown number of trips a pass, and
    a loop around it runs its own code once per set of them, numbers the SASS does not give. The whole
    kernel is one pass only where it has no loop.
    """
    loops = sass_loops(instructions)
    if not loops:
        return instructions, None
    moving = {_home(address, loops) for address, opcode, _ in instructions if opcode.startswith(kind)} - {None}
    if not moving:
        return instructions, (f"none of its {len(loops)} loops moves the {kind} bytes its elements are counted "
                              "by, and its whole code, read once, would count a loop's body once for all its trips")
    main = max(sorted(moving), key=lambda loop: _bytes(_within(instructions, loop), kind))
    for loop in sorted(moving):
        tangled = [f"{o[0]:#x}-{o[1]:#x}" for o in loops if o != loop and o[0] <= loop[1] and loop[0] <= o[1]]
        if tangled:
            return _within(instructions, main), (
                f"its loop {loop[0]:#x}-{loop[1]:#x}, which moves {kind} bytes, shares its range with the loop(s) "
                f"{', '.join(tangled)}, so its instructions an element hang on trip counts the SASS does not give")
    return _within(instructions, main), None


def _widths(counter: Counter) -> dict[str, int]:
    """Access counts by width, keyed as JSON keys them."""
    return {str(width): count for width, count in sorted(counter.items())}


def read_sass(sass: str, streaming: Streaming | None) -> dict:
    """The widths of a kernel's global loads and stores and, for a memory-bound one, its main loop's.

    The main loop's bytes of the kind ``streaming`` counts, over the bytes an element moves, give the
    elements it handles a thread, and its instructions over them the instructions per element. Where
    _main_loop cannot weigh the loops, ``unweighable`` says why instead of a count that would pass falsely.
    """
    instructions = _instructions(sass)
    made = {"instructions": len(instructions), "loads": _widths(_accesses(instructions, "LDG")),
            "stores": _widths(_accesses(instructions, "STG"))}
    if streaming is not None:
        kind = "LDG" if streaming.counts_loads else "STG"
        body, unweighable = _main_loop(instructions, kind)
        made.update(loop_instructions=len(body), loop_loads=_widths(_accesses(body, "LDG")),
                    loop_stores=_widths(_accesses(body, "STG")), dram_bytes=streaming.dram_bytes)
        if unweighable:
            made["unweighable"] = unweighable
        else:
            elements = _bytes(body, kind) / streaming.loop_bytes
            made.update(elements_per_thread=elements, instructions_per_element=round(len(body) / elements, 1))
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
            "ctas_per_sm": h100_ctas_per_sm(registers, config.num_warps, shared),
            "intended_ctas_per_sm": case.intended_ctas_per_sm(config.num_warps),
            "fills_16_bytes": case.fills_16_bytes, "representative": sass}
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
    parser.add_argument("--spec", action="append", default=[], metavar="MODULE:NAME",
                        help="compile this kernel declaration (repeatable) instead of every kernel in the registry")
    args = parser.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET") == "1":
        print("run with the interpreter off (unset TRITON_INTERPRET and FASTCORE_OPS_INTERPRET)")
        return 2
    if os.environ.get("FASTCORE_OPS_AUTOTUNE") == "0":
        print("run with autotuning on (unset FASTCORE_OPS_AUTOTUNE): with it off, each kernel keeps its first config")
        return 2
    if not CUOBJDUMP.exists():
        print(f"cuobjdump is missing ({CUOBJDUMP}): compiling only, registers, spills and SASS not read")
    try:
        _CASES[:] = all_cases(load_specs(args.spec))
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
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
