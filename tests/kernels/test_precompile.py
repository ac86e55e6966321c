"""``python -m benchmarks.kernels.precompile``: a lent GPU's calls compiled here into Triton's cache, found there the
second time; the kernel tests compiled only (tests/kernels/compile_only.py); and its refusals. Each compiling check
runs in a child with the interpreter off, on the toy kernel's declaration (tests/kernels/toy_kernel.py)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.cpu_alone  # sm_90 compiled here through a fake driver: nothing runs on a GPU

ROOT = Path(__file__).resolve().parents[2]
# Interpreter off, in the table's mode, as a lease's run; Triton's cache in the test's folder.
_INTERPRETER = ("TRITON_INTERPRET", "FASTCORE_OPS_INTERPRET", "FASTCORE_OPS_AUTOTUNE")

# The toy kernel's correctness and timing calls compiled.
_COMPILE = """
from benchmarks.kernels import compiling
from tests.kernels import toy_kernel
specs = (toy_kernel.SPEC,)
compiling.compile_calls("toy", compiling.correctness_calls(specs) + compiling.timing_calls(specs))
"""


def _child(args: list[str], cache: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in _INTERPRETER}
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True,
                          env={**env, "TRITON_CACHE_DIR": str(cache), "TRITON_STORE_BINARY_ONLY": "1"})


def test_a_runs_calls_compile_once_and_the_next_process_finds_them(tmp_path):
    pytest.importorskip("triton")
    cache = tmp_path / "cache"
    written = []
    for _ in range(2):
        result = _child(["-c", _COMPILE], cache)
        assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
        written.append({str(path): path.stat().st_mtime_ns for path in cache.glob("*/*.cubin")})
    # fp32, fp16 and bf16 at 37 elements (no multiple of 16), fp16 at 2**24: four specialisations of one kernel,
    # which the second process loads as the first wrote them.
    assert len(written[0]) == 4 and written[1] == written[0], written


def test_the_kernel_tests_compile_only_bf16_included(tmp_path):
    pytest.importorskip("triton")
    test = "tests/kernels/test_bce.py::test_matches_reference[7-10-0.0-index-bf16]"  # skipped off a GPU otherwise
    result = _child(["-m", "pytest", "-p", "tests.kernels.compile_only", "-q", "-p", "no:cacheprovider", test],
                    tmp_path / "cache")
    compiled = {path.name for path in (tmp_path / "cache").glob("*/*.cubin")}
    assert "skipped" not in result.stdout and "_bce_forward_kernel.cubin" in compiled, result.stdout[-4000:]


@pytest.mark.parametrize("args, message", [
    (["--parts", "timing,tets"], "--parts"),
    (["--cache", "README.md"], "not a folder"),
])
def test_bad_input_is_one_error_line_and_exit_2(tmp_path, args, message):
    args = ["--cache", str(tmp_path / "cache"), *args] if "--cache" not in args else args
    result = subprocess.run([sys.executable, "-m", "benchmarks.kernels.precompile", *args], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 2 and result.stderr.startswith("error: ") and len(result.stderr.splitlines()) == 1
    assert message in result.stderr and not (tmp_path / "cache").exists()


def test_the_interpreter_is_refused():
    result = subprocess.run([sys.executable, "-m", "benchmarks.kernels.precompile", "--cache", "x"], cwd=ROOT,
                            capture_output=True, text=True, env={**os.environ, "TRITON_INTERPRET": "1"})
    assert result.returncode == 2 and "interpreter" in result.stderr, result.stderr


@pytest.mark.parametrize("status, ran", [(0, True), (1, True), (2, False), (5, False)])
def test_the_tests_part_fails_only_where_pytest_did_not_run_them(monkeypatch, status, ran):
    pytest.importorskip("triton")
    from benchmarks.kernels import compiling

    # 1: some failed, as they may with nothing computed; 2: interrupted; 5: none collected.
    monkeypatch.setattr(compiling.subprocess, "run", lambda command: subprocess.CompletedProcess(command, status))
    assert compiling.compile_tests() is ran
