"""keep_freed_memory: a large block comes from the heap and stays resident when freed, for the next step to reuse."""

import inspect
import subprocess
import sys

import pytest

from fastcore_ops.data.backends.pil import PilBackend, _RunDecoding

on_glibc = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt; elsewhere the call changes nothing")


def _block_fate() -> tuple[bool, int]:
    """Allocate and touch 64 MiB (past glibc's largest mmap threshold), then free it: whether the
    block lay in the heap, and how many MiB the resident memory fell by at the free."""
    import os

    import torch

    def resident_mib():
        return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    block = torch.empty(16 * 2**20, dtype=torch.float32).fill_(1.0)
    address = block.data_ptr()
    heap = [line.split()[0].split("-") for line in open("/proc/self/maps") if line.rstrip().endswith("[heap]")]
    in_heap = any(int(low, 16) <= address < int(high, 16) for low, high in heap)
    before = resident_mib()
    del block
    return in_heap, round(before - resident_mib())


def _fate_in_a_new_process(keep: bool) -> tuple[bool, int]:
    turn_on = "from fastcore_ops.host_memory import keep_freed_memory\nassert keep_freed_memory()\n" if keep else ""
    probe = turn_on + inspect.getsource(_block_fate) + "print(*_block_fate())"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    in_heap, fall = done.stdout.split()
    return in_heap == "True", int(fall)


@on_glibc
def test_a_large_block_comes_from_the_heap_and_stays_resident_when_freed():
    assert _fate_in_a_new_process(keep=False) == (False, 64)  # mmap'd on its own, unmapped at once
    in_heap, fall = _fate_in_a_new_process(keep=True)
    assert in_heap and fall < 4


@on_glibc
def test_the_pil_backends_decoding_workers_keep_their_freed_memory(monkeypatch):
    # The workers are processes of the library's own: each batch's buffers reuse the last one's pages.
    monkeypatch.setattr(_RunDecoding, "__getitem__", lambda self, run: _block_fate())
    backend = PilBackend(batch_size=1, train=True, image_size=8, num_workers=1)
    backend._runs.runs = ["a probe instead of a run"]
    (in_heap, fall), = list(backend._loader)
    assert in_heap and fall < 4


def test_it_says_whether_it_could():
    probe = "from fastcore_ops.host_memory import keep_freed_memory; print(keep_freed_memory())"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == str(sys.platform.startswith("linux"))
