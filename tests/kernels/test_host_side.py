"""The kernels' host side, checked without a GPU: launches within budget, no host waits, no zero-fills,
and a host time close to the PyTorch op's (benchmarks/kernels/host_costs.py measures; the kernels
come from their declarations, benchmarks/kernels/registry.py).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.kernels import host_costs
from benchmarks.kernels.registry import KERNELS

pytestmark = pytest.mark.cpu_alone  # fake CUDA tensors and the host's time: nothing runs on a GPU

ROOT = Path(__file__).resolve().parents[2]
SPECS = [pytest.param(spec, id=spec.name) for spec in KERNELS]


@pytest.mark.parametrize("spec", SPECS)
def test_forward_and_backward_launch_within_budget(spec):
    phases = host_costs.launches_on_fake_gpu(spec)
    assert len(phases["forward"].launches) <= spec.forward_launches, phases["forward"]
    assert len(phases["backward"].launches) <= spec.backward_launches, phases["backward"]
    assert phases["forward"].triton_launches and phases["backward"].triton_launches  # the kernels, not a fallback


@pytest.mark.parametrize("spec", SPECS)
def test_no_host_waits_and_no_host_data_copied_to_the_device(spec):
    for name, phase in host_costs.launches_on_fake_gpu(spec).items():
        assert phase.host_waits == [] and phase.host_copies == [], (name, phase)


@pytest.mark.parametrize("spec", SPECS)
def test_autograd_zero_fills_nothing(spec):
    for name, phase in host_costs.zero_fills_through_autograd(spec).items():
        assert phase.zero_fills == [], (name, phase)


@pytest.mark.parametrize("spec", SPECS)
def test_host_time_is_close_to_the_pytorch_ops(spec):
    # A ratio of two minima, timed in turn in one sitting: load slows both sides, and the least of
    # many rounds is the call's own cost. Three tries, so that one unlucky sitting does not decide.
    ratios = []
    for _ in range(3):
        ours, rival = host_costs.host_times_us(spec)
        ratios.append(ours / rival)
        if ratios[-1] <= host_costs.HOST_TIME_GOAL:
            return
    pytest.fail(f"{spec.name}: our forward+backward costs the host {min(ratios):.2f}x the PyTorch op's "
                f"(goal {host_costs.HOST_TIME_GOAL}x; tries {', '.join(f'{r:.2f}' for r in ratios)})")


def test_at_known_keys_triton_launches_what_its_autotuner_would(tmp_path):
    """Compiled, with Triton's launch path run up to a driver that launches nothing
    (benchmarks/kernels/fake_driver.py): every kernel's second forward+backward, its keys met, launches the same
    compiled binaries with the same grids and arguments as through Triton's Autotuner.run, and none through it
    (KnownKeyLaunch); the command reports the host time of both."""
    pytest.importorskip("triton")
    # The table's mode (the suite's FASTCORE_OPS_AUTOTUNE=0 leaves each autotuner one config, and no key to look up).
    env = {k: v for k, v in os.environ.items()
           if k not in ("TRITON_INTERPRET", "FASTCORE_OPS_INTERPRET", "FASTCORE_OPS_AUTOTUNE")}
    result = subprocess.run([sys.executable, "-m", "benchmarks.kernels.host_side", "--out", str(tmp_path / "out")],
                            cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    rows = json.loads((tmp_path / "out" / "host_side.json").read_text())["rows"]
    assert [row["kernel"] for row in rows] == [spec.name for spec in KERNELS]
    for row in rows:
        assert row["same_launches"] and row["autotuner_runs"] == 0, row
        assert 0 < row["ours_launch_path_us"] and 0 < row["autotuner_launch_path_us"], row
    assert "through Autotuner.run" in (tmp_path / "out" / "host_side.md").read_text()
