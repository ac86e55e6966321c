"""Loaded by pytest before anything it collects, the docstring examples of the packages included.

Kernels run through Triton's interpreter unless a GPU is present, and fastcore_ops.kernels must then
be imported before any module imports triton (transformers does), since Triton fixes
interpreting when it is first imported. The installed package holds no conftest.py: the
fixtures its docstring examples use are here.
"""

import os

import torch

# The interpreter only where there is no GPU to compile for, unless the caller set the variable.
os.environ.setdefault("FASTCORE_OPS_INTERPRET", "0" if torch.cuda.is_available() else "1")
# On a GPU the tests check values, so each kernel runs its first config, untuned: tuning at every
# test's own sizes took most of the first GPU run (reports/gpu-check-h200-20261128). Every config
# still compiles in tests/kernels/test_h100_compile.py, and the GPU check runs the tuned kernels;
# FASTCORE_OPS_AUTOTUNE=1 tunes here too.
os.environ.setdefault("FASTCORE_OPS_AUTOTUNE", "0")

import fastcore_ops.kernels  # noqa: E402, F401  (sets up the interpreter: see above)
import pytest  # noqa: E402

# The training command computes with the cores other work leaves idle (fastcore_ops/training/compute_threads.py).
# A test's training child computes on one thread instead, whatever the load: its numbers do not
# depend on the box, and a busy box does not stall it (a tiny step on two OpenMP threads with one
# core taken ran 45x slower than on one: a 20-image run took 42 s against 0.9 s). This process
# imported torch above, with fastcore_ops.kernels, so keeps PyTorch's default.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Under pytest-xdist (`make test` runs one worker a core) each worker computes on one thread too: two
# workers of two OpenMP threads each on two cores spin against each other.
if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)
from PIL import Image  # noqa: E402

from fastcore_ops.data.backends.dali import dali_available  # noqa: E402


class _TracebacksAtOnce:
    """Each failure's traceback on the console as the test fails, not in the summary at the end: a run stopped at
    its time budget (tools/lent_gpu.sh's pytest step sets FASTCORE_OPS_TRACEBACKS_AT_ONCE=1) keeps why its tests
    failed. The first GPU runs kept only the failures' names."""

    def __init__(self, config):
        self.config = config

    def pytest_runtest_logreport(self, report):
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if report.failed and terminal is not None:  # pytest-xdist's workers print nothing: their controller does
            terminal.write_line(f"--- {report.nodeid} failed ({report.when}):\n{report.longreprtext}")


def pytest_configure(config):
    if os.environ.get("FASTCORE_OPS_TRACEBACKS_AT_ONCE") == "1":
        config.pluginmanager.register(_TracebacksAtOnce(config), "fastcore_ops-tracebacks-at-once")


@pytest.fixture(autouse=True)
def _data_doctest_files(request, doctest_namespace):
    """fastcore_ops.data's examples: a small JPEG, and DALI's examples skipped where DALI cannot run."""
    if not request.node.name.startswith("fastcore_ops.data."):
        return
    if request.node.name.startswith("fastcore_ops.data.backends.dali.DaliBackend") and dali_available() is not None:
        pytest.skip(f"DALI cannot run here: {dali_available()}")
    red_jpeg = request.getfixturevalue("tmp_path") / "red.jpg"
    Image.new("RGB", (64, 48), (200, 30, 30)).save(red_jpeg, quality=95)
    doctest_namespace["red_jpeg"] = str(red_jpeg)


def _made_up_record(name: str, budget: float, seed: int, seconds: float, top1: float, **fields):
    from fastcore_ops.training.tradeoff.results import RunRecord

    return RunRecord.made_up(name, budget, seed, quality=top1, seconds=seconds, machine="laptop/cpu", **fields)


def _tradeoff_sweep():
    """Two seeds of a baseline, and of a recipe that reaches the same top-1 in less time."""
    return [_made_up_record(recipe, budget, seed, seconds * speed, top1 + gain + seed / 100, metrics={"eval_loss": 1.0},
                            phases={"forward": seconds * speed / 3, "backward": seconds * speed / 2})
            for recipe, speed, gain in (("cifar_baseline", 1.0, 0.0), ("cifar_mild", 0.5, 0.02))
            for budget, seconds, top1 in ((0.5, 100.0, 0.50), (1.0, 200.0, 0.60)) for seed in (0, 1)]


def _ablation():
    """Cutout gains 1 and 2 points of top-1 on the two seeds, at 5% more time per step."""
    return [_made_up_record(variant, 1.0, seed, seconds, top1 + seed * gain, metrics={"top1_tta": top1 + seed * gain + 0.01})
            for variant, seconds, top1, gain in (("cifar_baseline", 200.0, 0.60, 0.01),
                                                 ("cifar_baseline+cutout", 210.0, 0.61, 0.02)) for seed in (0, 1)]


@pytest.fixture(autouse=True)
def _training_doctest_records(request, doctest_namespace):
    """The examples of fastcore_ops.training.tradeoff and .ablate: made-up runs (``records``) and a folder (``out``)."""
    for package, records in (("fastcore_ops.training.tradeoff.", _tradeoff_sweep), ("fastcore_ops.training.ablate.", _ablation)):
        if request.node.name.startswith(package):
            doctest_namespace.update(records=records(), out=request.getfixturevalue("tmp_path"))
