"""keep_freed_memory: a large block comes from the heap and stays resident when freed, for the next step to reuse."""

import subprocess
import sys

import pytest

# Allocates and touches 64 MiB (past glibc's largest mmap threshold), frees it, and prints whether
# the block lay in the heap and how many MiB the resident memory fell by at the free.
_PROBE = """
import os, sys
import torch
if sys.argv[1] == "keep":
    from training.host_memory import keep_freed_memory
    assert keep_freed_memory()
def resident_mib():
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
block = torch.empty(16 * 2**20, dtype=torch.float32).fill_(1.0)
address = block.data_ptr()
heap = [line.split()[0].split("-") for line in open("/proc/self/maps") if line.rstrip().endswith("[heap]")]
in_heap = any(int(low, 16) <= address < int(high, 16) for low, high in heap)
before = resident_mib()
del block
print(in_heap, round(before - resident_mib()))
"""


def _probe(mode: str) -> tuple[bool, int]:
    done = subprocess.run([sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, check=True)
    in_heap, fall = done.stdout.split()
    return in_heap == "True", int(fall)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt; elsewhere the call changes nothing")
def test_a_large_block_comes_from_the_heap_and_stays_resident_when_freed():
    assert _probe("default") == (False, 64)  # mmap'd on its own, unmapped at once
    in_heap, fall = _probe("keep")
    assert in_heap and fall < 4


def test_it_says_whether_it_could():
    probe = "from training.host_memory import keep_freed_memory; print(keep_freed_memory())"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == str(sys.platform.startswith("linux"))
