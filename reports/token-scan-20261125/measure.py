"""What scanning a token file's ids when it is opened costs (``load_prepared``'s check that every id is below the
vocabulary size): seconds per 100 MB.

    PYTHONPATH=. python reports/token-scan-20261125/measure.py 512 /tmp/token-scan > reports/token-scan-20261125/output.txt

Writes SIZE_MB of random ids below 4096 (``--dtype``, uint16 by default) to FOLDER/train.bin,
then times ``fastcore_ops.training.text.tokens.largest_token_id`` on it, the scan ``load_prepared`` runs
(16 MB at a time), in two states taking turns ``--repeats`` times:

- cold: the file's pages dropped from the page cache first (``posix_fadvise(DONTNEED)`` on this
  one file, nothing else's cache touched), so the scan reads the disk, as a run does when the
  tokens were prepared long before;
- warm: the file in the page cache, as a run does right after preparing its tokens.

For comparison it also times ``np.memmap(path).max()`` (warm): one map of the whole file, as fast,
but its pages stay in the process. Prints one line per repeat, the medians in seconds per 100 MB,
then how much each way of scanning raised a fresh process's peak resident memory
(``VmHWM``). FOLDER/train.bin is removed at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from fastcore_ops.training.text.tokens import largest_token_id

_WRITE_IDS = 1 << 24  # ids written at a time


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("size_mb", type=int, help="size of the token file to scan, in MB (10^6 bytes)")
    parser.add_argument("folder", type=Path, help="scratch folder for the token file (made if missing)")
    parser.add_argument("--dtype", choices=("uint16", "uint32"), default="uint16")
    parser.add_argument("--repeats", type=int, default=5, help="timings of each state")
    parser.add_argument("--peak", choices=_SCANS, help=argparse.SUPPRESS)  # a child: one scan, its memory printed
    return parser.parse_args(argv)


def _write_tokens(path: Path, size_bytes: int, dtype: np.dtype) -> None:
    generator = np.random.default_rng(0)
    remaining = size_bytes // dtype.itemsize
    with open(path, "wb") as handle:
        while remaining:
            count = min(remaining, _WRITE_IDS)
            generator.integers(0, 4096, count).astype(dtype).tofile(handle)
            remaining -= count
        handle.flush()
        os.fsync(handle.fileno())  # written out, so that DONTNEED can drop the pages


def _drop_from_page_cache(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(descriptor)


_SCANS = {
    "chunked": lambda path, dtype: largest_token_id(path, dtype),
    "one map of the whole file": lambda path, dtype: np.memmap(path, dtype=dtype, mode="r").max(),
}


def _peak_resident_kb() -> int:
    """This process's peak resident memory (Linux's VmHWM: unlike ru_maxrss, not inherited from the parent)."""
    status = Path("/proc/self/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1])


def _peak_growth_mb(path: Path, dtype: np.dtype, scan: str) -> float:
    """How much ``scan`` raises the peak resident memory of a fresh process, in MB."""
    command = [sys.executable, __file__, "0", str(path.parent), "--dtype", dtype.name, "--peak", scan]
    return float(subprocess.run(command, check=True, capture_output=True, text=True).stdout)


def _timed(scan) -> float:
    started = time.perf_counter()
    scan()
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    dtype = np.dtype(args.dtype)
    if args.peak:
        before = _peak_resident_kb()
        _SCANS[args.peak](args.folder / "train.bin", dtype)
        print((_peak_resident_kb() - before) / 1024)
        return 0
    args.folder.mkdir(parents=True, exist_ok=True)
    path = args.folder / "train.bin"
    _write_tokens(path, args.size_mb * 10**6, dtype)
    size_mb = path.stat().st_size / 1e6
    print(f"file: {path}, {size_mb:.0f} MB of {dtype.name} ids; python {sys.version.split()[0]}, "
          f"numpy {np.__version__}, {os.cpu_count()} CPUs")
    times: dict[str, list[float]] = {"cold": [], "warm": [], "one map of the whole file, warm": []}
    try:
        for repeat in range(args.repeats):
            _drop_from_page_cache(path)
            times["cold"].append(_timed(lambda: _SCANS["chunked"](path, dtype)))
            times["warm"].append(_timed(lambda: _SCANS["chunked"](path, dtype)))
            times["one map of the whole file, warm"].append(
                _timed(lambda: _SCANS["one map of the whole file"](path, dtype)))
            timings = ", ".join(f"{state} {values[-1]:.3f} s" for state, values in times.items())
            print(f"repeat {repeat + 1}: {timings}")
        growth = {scan: _peak_growth_mb(path, dtype, scan) for scan in _SCANS}
    finally:
        path.unlink()
    for state, values in times.items():
        median = statistics.median(values)
        print(f"{state}: median {median:.3f} s for {size_mb:.0f} MB = {median / size_mb * 100:.3f} s per 100 MB "
              f"({size_mb / median:.0f} MB/s)")
    for scan, megabytes in growth.items():
        print(f"peak resident memory of a fresh process, raised by the scan ({scan}): {megabytes:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
