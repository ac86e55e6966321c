"""The trainer as a user gets it without a checkout: from the built wheel's console script, and from Python."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fastcore_ops.training import fit
from fastcore_ops.training.trainer import FitResult
from fastcore_ops.training.train import child_environment
from tests.hang_guard import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]
# A few steps of the smallest recipe: what is checked is where the code came from and what it wrote.
SHORT = {"schedule.epochs": 1, "data.batch_size": 8, "data.num_workers": 0, "schedule.warmup_epochs": 0}


def test_the_installed_wheel_trains_from_python_and_has_its_console_scripts(micro_cifar, tmp_path):
    """pip's install of the built wheel, run from outside the checkout with nothing of it on the path: the Python
    API trains a tiny run, and each console script is there and answers --help."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp_path / "wheel")], cwd=ROOT, check=True, capture_output=True, timeout=HANG_GUARD_S)
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site),
                    *map(str, (tmp_path / "wheel").glob("fastcore_ops-*.whl"))],
                   check=True, capture_output=True, timeout=HANG_GUARD_S)
    installed = child_environment(PYTHONPATH=str(site))
    script = (f"from fastcore_ops.training import fit\n"
              f"result = fit('cifar_baseline', data={str(micro_cifar)!r}, out='run', overrides={SHORT!r}, progress=False)\n"
              f"import fastcore_ops; print(fastcore_ops.__file__, result.metric, result.steps)")
    trained = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=installed, capture_output=True,
                             text=True, timeout=HANG_GUARD_S)
    assert trained.returncode == 0, trained.stderr[-3000:]
    location, metric, steps = trained.stdout.split()[-3:]
    assert Path(location).is_relative_to(site) and metric == "top1" and int(steps) > 0  # the wheel's code ran
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["steps"] == int(steps)
    helped = subprocess.run([site / "bin" / "fastcore-train", "--help"], cwd=tmp_path, env=installed,
                            capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert helped.returncode == 0 and helped.stdout.startswith("usage: fastcore-train "), helped.stderr[-3000:]
    assert {path.name for path in (site / "bin").iterdir()} >= {"fastcore-train", "fastcore-tradeoff", "fastcore-export"}


def test_fit_trains_a_recipe_from_python_as_the_command_does(micro_cifar, tmp_path, capsys):
    result = fit("cifar_baseline", data=micro_cifar, out=tmp_path / "run", overrides=SHORT, progress=False)
    assert isinstance(result, FitResult) and result.metric == "top1" and result.steps > 0
    written = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert written["steps"] == result.steps and written["metrics"] == result.metrics
    assert json.loads((tmp_path / "run" / "config.json").read_text())["data"]["batch_size"] == 8


@pytest.mark.parametrize("recipe, settings, message", [
    ("cifar_basline", {}, "cifar_baseline"),
    ("cifar_baseline", {"optimizer.lr": -1}, "optimizer.lr"),
])
def test_fit_refuses_as_the_command_does_and_writes_nothing(recipe, settings, message, micro_cifar, tmp_path):
    with pytest.raises(ValueError, match=message):
        fit(recipe, data=micro_cifar, out=tmp_path / "run", overrides=settings, progress=False)
    assert not (tmp_path / "run").exists()
