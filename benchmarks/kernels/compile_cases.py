"""What a kernel's declaration tells the sm_90 compile check (``tests/kernels/h100_compile.py``): each Triton
kernel it launches, with the argument types and specialisation of a representative launch, and what its
compiled code must give (the occupancy it is designed for, its 128-bit paths, the bytes its elements move).

A declaration's ``compile_cases()`` yields these; nothing here compiles, so it imports on any machine.

    >>> Streaming(loop_bytes=2, dram_bytes=4).counts_loads
    False
    >>> multiples_of_16({"C": 64, "H": 112, "W": 7})
    ('C', 'H')
"""

from __future__ import annotations

from dataclasses import dataclass

from fastcore_ops.kernels.backend import triton


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
    """One kernel with the argument types, and the specialisation, that a representative launch gives it.

    ``ctas_per_sm``: the CTAs an H100 SM is meant to hold at once (docs/kernels.md, "Occupancy each kernel
    intends"); None for a streaming kernel, meant for half an SM's 64 warps. ``fills_16_bytes``: the launch
    gives each thread 16 contiguous bytes, so the main loop's loads and stores must all be 128 bits wide.
    """

    kernel: object  # a JITFunction, or an Autotuner around one
    pointers: dict[str, str]  # pointer argument -> Triton element type, e.g. "bf16"
    constexprs: dict[str, object]
    floats: tuple[str, ...] = ()
    unit_strides: tuple[str, ...] = ()  # integer arguments a launch passes as 1 (Triton specialises them)
    divisible: tuple[str, ...] = ()  # integer arguments the representative launch passes as multiples of 16
    representative: int = 0  # the config whose SASS is read, an index into configs(): the one meant for the layout
    streaming: Streaming | None = None  # for a memory-bound kernel, what its elements move
    ctas_per_sm: int | None = None
    fills_16_bytes: bool = False

    def configs(self):
        return getattr(self.kernel, "configs", [triton.Config({})])

    def jit_function(self):
        return self.kernel.fn if hasattr(self.kernel, "configs") else self.kernel  # an autotuner's own kernel

    def intended_ctas_per_sm(self, num_warps: int) -> int:
        """The CTAs an SM should hold at ``num_warps`` warps a CTA."""
        return self.ctas_per_sm if self.ctas_per_sm is not None else 32 // num_warps

    def layout(self) -> str:
        """The layout compiled for: NCHW or NHWC (by the unit stride), rows, planes or flat, or '' (no choice)."""
        if any(name.endswith("stride_c") for name in self.unit_strides):
            return "NHWC"
        if any(name.endswith("stride_w") for name in self.unit_strides):
            return "NCHW"
        if "PLANES" in self.constexprs:
            return "flat" if self.constexprs.get("FLAT") else "planes" if self.constexprs["PLANES"] else "rows"
        return ""

    def name(self) -> str:
        """The kernel, its layout and the constexprs that pick its code path (not its tile, nor ACC, nor the
        blur max pool's GROUP and WHOLE_WORDS, which follow from the launch's strides and widths)."""
        picks = [f"{k}={v}" for k, v in self.constexprs.items()
                 if k not in ("ACC", "PLANES", "FLAT", "GROUP", "WHOLE_WORDS") and not k.startswith("BLOCK")]
        return " ".join([self.jit_function().__name__, *picks, self.layout()]).strip()


def multiples_of_16(values: dict[str, int]) -> tuple[str, ...]:
    """The arguments whose value a launch marks divisible by 16 (Triton's ``tt.divisibility``)."""
    return tuple(name for name, value in values.items() if value % 16 == 0)
