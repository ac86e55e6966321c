"""``python -m fastcore_ops.training.tradeoff`` for real: a tiny sweep on real CIFAR-10 images writes every output and resumes.

The command runs in this process (its ``main``), which saves its start-up time; the training
runs are real ``python -m fastcore_ops.training.train`` subprocesses.
"""

import csv
import json
import sys
from pathlib import Path

import pytest

from fastcore_ops.training.tradeoff.cli import main
from fastcore_ops.training.tradeoff.machine import machine_label
from fastcore_ops.training.train import child_environment
from tests.hang_guard import run_guarded
from tests.training.conftest import link_cifar_subset

ROOT = Path(__file__).resolve().parents[3]
# Tiny on purpose: 200 training images at batch 32 over 4 epochs is 6 steps per epoch, so
# budgets 0.05 and 0.1 are 1 and 2 steps; the test checks the plumbing, not the learning.
SWEEP = ["--recipes", "cifar_baseline,cifar_mild", "--budgets", "0.05,0.1", "--seeds", "1", "--no-progress",
         "--set", "data.batch_size=32", "--set", "data.num_workers=1", "--set", "schedule.epochs=4.0",
         "--set", "schedule.warmup_epochs=0.0"]
OUTPUTS = ("results.csv", "results.json", "speedups.csv", "speedups.md", "breakdown.csv", "pareto.png",
           "breakdown.png", "report.html")


def _tradeoff(args, capsys):
    code = main(args)
    captured = capsys.readouterr()
    assert code == 0, captured.err[-3000:]
    return captured.out


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("tradeoff")
    data = link_cifar_subset(root / "cifar", train_per_class=20, test_per_class=5)
    args = [*SWEEP, "--data", str(data), "--out", str(root / "report")]
    assert main(args) == 0, "the tiny sweep failed; its error is in the captured stderr"
    return root / "report", args


def test_a_tiny_sweep_writes_every_output(sweep):
    out, _ = sweep
    for name in OUTPUTS:
        assert (out / name).stat().st_size > 0, name
    with open(out / "results.csv") as file:
        rows = list(csv.DictReader(file))
    assert sorted((r["recipe"], r["budget"]) for r in rows) == [
        ("cifar_baseline", "0.05"), ("cifar_baseline", "0.1"), ("cifar_mild", "0.05"), ("cifar_mild", "0.1")]
    assert all(r["machine"] == machine_label("cpu") and len(r["config_hash"]) == 12 for r in rows)
    assert all(r["precision"] in ("fp32", "bf16 autocast") for r in rows), "what amp resolved to, per run"
    assert all(float(r["train_seconds"]) > 0 and 0 <= float(r["metrics.top1"]) <= 1 for r in rows)
    # Image classification is judged by top-1, higher is better, and counts images.
    assert {(r["metric"], r["higher_is_better"], r["metric_label"], r["sample_unit"]) for r in rows} == {
        ("top1", "True", "top-1 (%)", "images")}
    # Seed and budget aside, each recipe's runs share one configuration; the two recipes differ.
    setups = {(r["recipe"], r["setup_hash"]) for r in rows}
    assert len(setups) == 2 and len({hash_ for _, hash_ in setups}) == 2
    assert "data:image/png;base64," in (out / "report.html").read_text()


def test_rerunning_the_sweep_resumes_the_unfinished_run_and_redoes_nothing(sweep, capsys):
    out, args = sweep
    runs = out / "runs"
    unfinished = runs / "cifar_mild-x0.1-s0"
    (unfinished / "summary.json").unlink()  # as if stopped after its last checkpoint
    others = {path: path.stat().st_mtime_ns for path in runs.glob("*/summary.json")}
    stdout = _tradeoff(args, capsys)
    assert stdout.count("(finished before)") == 3 and stdout.count(": top-1 ") == 4
    assert (unfinished / "summary.json").is_file()
    assert "--resume" not in (unfinished / "train.stderr.log").read_text()  # no "pass --resume" refusal
    assert {path: path.stat().st_mtime_ns for path in others} == others


def _cost(args, cwd):
    """The cost pass as a user runs it: a process of its own, without the suite's Triton interpreter."""
    command = [sys.executable, "-m", "fastcore_ops.training.tradeoff", "--cost", *args, "--no-progress", "--threads", "1"]
    return run_guarded(command, cwd=cwd, env=child_environment())


def test_the_cost_pass_prices_every_run_of_the_sweep_and_its_times_can_be_reused(sweep, tmp_path):
    out, args = sweep
    data = args[args.index("--data") + 1]
    done = _cost([str(out), "--data", data, "--rounds", "1", "--out", str(tmp_path / "costed")], ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    costed = tmp_path / "costed"
    for name in ("costs.json", "costs.md", "modelled-vs-measured.md", *OUTPUTS):
        assert (costed / name).stat().st_size > 0, name
    for name in OUTPUTS:
        assert (costed / "measured" / name).stat().st_size > 0, name
    modelled = {(row["recipe"], row["budget"]): row for row in json.loads((costed / "results.json").read_text())}
    measured = {(row["recipe"], row["budget"]): row for row in json.loads((out / "results.json").read_text())}
    assert modelled.keys() == measured.keys()
    assert all(row["machine"].endswith(" (modelled)") and row["train_seconds"] > 0 for row in modelled.values())
    assert all(modelled[key]["metrics"] == measured[key]["metrics"] for key in measured)  # only the time changes
    # One setup per recipe, each timed at its own image size: cifar_mild's two steps are at its first size, 16 px.
    costs = json.loads((costed / "costs.json").read_text())
    sizes = {setup["recipe"]: {kind["image_size"] for kind in costs["kinds"] if kind["setup"] == setup["setup"]}
             for setup in costs["setups"]}
    assert sizes == {"cifar_baseline": {32}, "cifar_mild": {16}}
    assert "| cifar_mild x0.1 seed 0 |" in (costed / "modelled-vs-measured.md").read_text()
    # The same costs again, read from the file: the same modelled times, nothing timed.
    again = _cost([str(out), "--data", data, "--times", str(costed / "costs.json"), "--out", str(tmp_path / "again")],
                  ROOT)
    assert again.returncode == 0, again.stderr[-3000:]
    assert not (tmp_path / "again" / "costs.json").exists()
    repeated = {(row["recipe"], row["budget"]): row["train_seconds"]
                for row in json.loads((tmp_path / "again" / "results.json").read_text())}
    assert repeated == {key: row["train_seconds"] for key, row in modelled.items()}


def test_the_cost_pass_refuses_runs_priced_on_other_data_in_one_line(sweep, tmp_path):
    out, args = sweep
    data = args[args.index("--data") + 1]
    done = _cost([str(out), "--data", data, "--subset", "10", "--out", str(tmp_path / "costed")], ROOT)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "but on this data it would train" in done.stderr and "pass the --data (and --subset)" in done.stderr
    assert not (tmp_path / "costed").exists()


def test_the_cost_pass_refuses_to_time_under_the_interpreter(sweep, tmp_path, capsys):
    out, args = sweep
    code = main(["--cost", str(out), "--data", args[args.index("--data") + 1], "--out", str(tmp_path / "costed")])
    error = capsys.readouterr().err
    assert code == 2 and "Triton's interpreter is on" in error and not (tmp_path / "costed").exists()
