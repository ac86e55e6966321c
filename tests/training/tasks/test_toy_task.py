"""A third task, defined in the tests only (toy_task.py), goes through the unchanged commands: it trains, resumes,
sweeps, is priced by the cost pass, ablated, and timed by the step-floor benchmark. A method defined there too
(toy_method.py) is turned on, resumed and ablated.

Each command is a child process that imports the task's module with ``--import``, as a user's
own package is loaded: this process never imports it, so its registries stay the project's.
"""

import csv
import json
import shutil
import subprocess
import sys

import torch

from fastcore_ops.training import checkpoint
from fastcore_ops.training.train import child_environment
from tests.hang_guard import run_guarded

IMPORT = ["--import", "tests.training.tasks.toy_task"]
OWN_METHOD = ["--import", "tests.training.tasks.toy_method"]


def _command(module: str, *args: str) -> subprocess.CompletedProcess:
    return run_guarded([sys.executable, "-m", module, *args], env=child_environment())


def _train(*args: str, expect: int = 0) -> str:
    run = _command("fastcore_ops.training.train", *args, "--no-progress")
    assert run.returncode == expect, run.stderr[-3000:]
    return run.stderr


def _weights(out):
    return checkpoint.load(out / checkpoint.CHECKPOINT_NAME)["model"]


def _resumes_as_the_uninterrupted_run(whole, stopped, *imports: str) -> None:
    """Resume (with ``imports`` too) a copy of the finished run ``whole`` (``--keep-checkpoints 3``) made as a run
    stopped after its second epoch's checkpoint (step 8 of 16) leaves its folder: it ends with ``whole``'s weights."""
    shutil.copytree(whole, stopped)
    for name in ("summary.json", "checkpoint.pt", "checkpoint.1.pt"):
        (stopped / name).unlink()
    (stopped / "checkpoint.2.pt").rename(stopped / "checkpoint.pt")
    assert checkpoint.load(stopped / checkpoint.CHECKPOINT_NAME)["step"] == 8
    _train(*IMPORT, *imports, "--resume", "--out", str(stopped))
    for name, tensor in _weights(whole).items():
        assert torch.equal(tensor, _weights(stopped)[name]), name


def test_the_toy_task_trains_and_a_resumed_run_ends_as_the_uninterrupted_one(tmp_path):
    whole, stopped = tmp_path / "whole", tmp_path / "stopped"
    _train(*IMPORT, "--recipe", "toy_regression", "--out", str(whole), "--keep-checkpoints", "3")
    summary = json.loads((whole / "summary.json").read_text())
    assert (summary["metric"], summary["sample_unit"], summary["steps"]) == ("mse", "samples", 16)
    assert summary["metrics"]["mse"] < 5.0, "4 epochs of SGD fit most of y's variance (30)"
    _resumes_as_the_uninterrupted_run(whole, stopped)
    # Without the import the saved run's task is unknown, and the refusal says how to load it.
    error = _train("--resume", "--out", str(stopped), expect=2)
    assert "task must be one of 'image_classification', 'language_model', got 'toy_regression'" in error
    assert "--import MODULE" in error


def test_a_method_of_the_user_s_own_is_turned_on_saved_resumed_and_ablated_and_refused_without_its_module(
        tmp_path):
    # The methods section was built before --import registered the method: --set refused it as an unknown field.
    whole, stopped, ablation = tmp_path / "whole", tmp_path / "stopped", tmp_path / "ablation"
    _train(*IMPORT, *OWN_METHOD, "--recipe", "toy_regression", "--set", "methods.weight_clamp={'limit': 1.5}",
           "--out", str(whole), "--keep-checkpoints", "3")
    assert json.loads((whole / "config.json").read_text())["methods"]["weight_clamp"] == {"limit": 1.5}
    assert _weights(whole)["weight"].abs().max() == 1.5, "the fitted coefficients (1, 2, 3, 4) clamped at 1.5"
    _resumes_as_the_uninterrupted_run(whole, stopped, *OWN_METHOD)
    error = _train(*IMPORT, "--resume", "--out", str(stopped), expect=2)
    assert "unknown configuration field 'methods.weight_clamp'" in error and "--import MODULE" in error
    _succeeds("fastcore_ops.training.ablate", *OWN_METHOD, "--recipe", "toy_regression", "--methods", "weight_clamp",
              "--seeds", "1", "--no-progress", "--out", str(ablation))
    assert _effect(ablation)["variant"] == "toy_regression+weight_clamp"


def _succeeds(module: str, *args: str) -> None:
    run = _command(module, *IMPORT, *args, "--device", "cpu")
    assert run.returncode == 0, run.stderr[-3000:]


def test_a_two_point_tradeoff_sweeps_the_toy_task_and_the_cost_pass_prices_it(tmp_path):
    out, priced = tmp_path / "report", tmp_path / "priced"
    _succeeds("fastcore_ops.training.tradeoff", "--recipes", "toy_regression", "--budgets", "0.5,1", "--no-progress",
              "--out", str(out))
    runs = json.loads((out / "results.json").read_text())
    assert sorted((run["budget"], run["metric"], run["steps"]) for run in runs) == [(0.5, "mse", 8), (1.0, "mse", 16)]
    _succeeds("fastcore_ops.training.tradeoff", "--cost", str(out), "--rounds", "1", "--no-progress",
              "--out", str(priced))
    costs = json.loads((priced / "costs.json").read_text())
    assert [setup["recipe"] for setup in costs["setups"]] == ["toy_regression"]
    assert "toy_regression x0.5 seed 0" in (priced / "modelled-vs-measured.md").read_text()


def _effect(folder):
    with open(folder / "ablation.csv") as file:
        (row,) = csv.DictReader(file)
    return row


def test_an_ablation_measures_a_method_s_effect_on_the_toy_task_and_its_cost_pass_prices_it(tmp_path):
    out, priced = tmp_path / "ablation", tmp_path / "priced"
    _succeeds("fastcore_ops.training.ablate", "--recipe", "toy_regression", "--methods", "ema", "--seeds", "1",
              "--no-progress", "--out", str(out))
    row = _effect(out)
    assert row["variant"] == "toy_regression+ema" and row["mean squared error change (+ is better)"]
    assert "Each method alone against toy_regression" in (out / "ablation.md").read_text()
    _succeeds("fastcore_ops.training.ablate", "--recipe", "toy_regression", "--cost", str(out), "--rounds", "1",
              "--no-progress", "--out", str(priced))
    for folder in (priced, priced / "measured"):  # the ablation's report on the modelled times, and on the measured
        assert (folder / ".fastcore_ops-ablate").is_file()
        assert _effect(folder)["mean squared error change (+ is better)"] == row["mean squared error change (+ is better)"]
    assert _effect(priced / "measured") == row, "the measured times' report is the sweep's own"
    assert "toy_regression+ema x1 seed 3" in (priced / "modelled-vs-measured.md").read_text()


def test_the_step_floor_times_the_toy_task_s_model_on_its_batches(tmp_path):
    out = tmp_path / "floor"
    _succeeds("benchmarks.step_floor", "--recipe", "toy_regression", "--out", str(out))
    floor = json.loads((out / "summary.json").read_text())
    assert floor["steps"] == 16 and list(floor["sizes"]) == ["4"], "one shape of batch: 4 features a row"
    assert floor["sizes"]["4"]["steps"] == 16 and 0 < floor["train_seconds"] <= floor["median_train_seconds"]
