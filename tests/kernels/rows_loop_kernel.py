"""A kernel whose instructions an element the SASS cannot give, for the sm_90 compile check to refuse.

Each program sums a run-time number of rows over tile after tile: the loop over rows, kept rolled, lies
within the loop over tiles, whose own code stores. Read as the check once read it (the innermost loop
that stores), it made 0.9 instructions an element, from the compiler's copy of the tile loop for zero rows.
"""

from types import SimpleNamespace

from benchmarks.kernels.compile_cases import KernelCase, Streaming
from fastcore_ops.kernels.backend import tl, triton


@triton.jit
def _tile_rows_sum_kernel(x_ptr, out_ptr, n, rows, tiles, BLOCK: tl.constexpr):
    for tile in range(tl.program_id(0), tiles, tl.num_programs(0)):
        offsets = tile * BLOCK + tl.arange(0, BLOCK)
        total = tl.zeros((BLOCK,), tl.float32)
        for row in range(rows):
            total += tl.load(x_ptr + row * n + offsets).to(tl.float32)
        tl.store(out_ptr + offsets, total.to(out_ptr.dtype.element_ty))


def _compile_cases():
    # bf16 rows of 2**20 in tiles of 1024: two bytes stored an element; 3 rows read make 8 bytes of DRAM.
    yield KernelCase(_tile_rows_sum_kernel, {"x_ptr": "bf16", "out_ptr": "bf16"}, {"BLOCK": 1024},
                     divisible=("n",), streaming=Streaming(loop_bytes=2, dram_bytes=8))


SPEC = SimpleNamespace(compile_cases=_compile_cases)
