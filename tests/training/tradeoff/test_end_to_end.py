"""``python -m training.tradeoff`` for real: a tiny sweep on real CIFAR-10 images writes every output and resumes.

The command runs in this process (its ``main``), which saves its start-up time; the training
runs are real ``python -m training.train`` subprocesses.
"""

import csv

import pytest

from tests.training.conftest import link_cifar_subset
from training.tradeoff.cli import main
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
    assert all(r["machine"].endswith("/cpu") and len(r["config_hash"]) == 12 for r in rows)
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
