"""Reports survive bad runs: a run that diverged, failed, trained for no time or left an unreadable summary is
listed with why and its log, and left out of the curves, speedups and figures; every other output is written,
and the sweep goes on past it."""

import csv
import dataclasses
import json

import pytest

from fastcore_ops.training.config import to_dict
from fastcore_ops.training.tradeoff.cli import main
from fastcore_ops.training.tradeoff.planning import PlannedRun, run_config
from fastcore_ops.training.tradeoff.report import build_report
from fastcore_ops.training.tradeoff.results import FailedRun, merge_records, read_results, write_results
from fastcore_ops.training.tradeoff.sweep import read_outcome
from tests.training.tradeoff import fakes
from tests.training.tradeoff.fakes import SWEEP, record

OUTPUTS = ("results.csv", "results.json", "speedups.csv", "speedups.md", "breakdown.csv", "pareto.png",
           "breakdown.png", "report.html")
NAN, INF = float("nan"), float("inf")




def _rows(path):
    with open(path) as file:
        return list(csv.DictReader(file))


def _report(runs, out):
    written = build_report(runs, out, baseline="base")
    return {path.name for path in written}


@pytest.mark.parametrize("bad, status, reason", [
    (record("fast", 4.0, 200.0, NAN, loss=NAN), "diverged", "its summary gives top1 = nan, eval_loss = nan"),
    (record("fast", 4.0, 200.0, 0.1, loss=NAN), "diverged", "eval_loss = nan"),  # a NaN loss, a finite top-1
    (record("fast", 4.0, 200.0, 0.1, loss=INF), "diverged", "eval_loss = inf"),
    (dataclasses.replace(record("fast", 4.0, 0.0, 0.9), steps=0), "failed", "trained 0 steps in 0 s"),
    (FailedRun("m/cpu", "fast", 4.0, 0, "failed", "training exited with code 1: RuntimeError: boom",
               "runs/fast-x4-s0/train.stderr.log"), "failed", "RuntimeError: boom (log: runs/fast-x4-s0/"),
], ids=["nan-metric", "nan-loss", "inf-loss", "zero-time", "failed"])
def test_a_bad_run_is_listed_with_why_and_left_out_of_every_curve_speedup_and_figure(bad, status, reason, tmp_path):
    assert _report(SWEEP, tmp_path / "clean") == set(OUTPUTS)
    assert _report([*SWEEP, bad], tmp_path / "bad") == set(OUTPUTS)
    for name in ("speedups.csv", "breakdown.csv"):  # exactly as if the bad run had never been
        assert (tmp_path / "bad" / name).read_text() == (tmp_path / "clean" / name).read_text()
    row = _rows(tmp_path / "bad" / "results.csv")[-1]
    assert (row["recipe"], row["budget"], row["status"]) == ("fast", "4.0", status)
    assert {r["status"] for r in _rows(tmp_path / "bad" / "results.csv")[:-1]} == {"finished"}
    page = (tmp_path / "bad" / "report.html").read_text()
    assert f"<td>{status}</td>" in page and reason in page
    assert "1 run(s) left out of the curves" in page


def test_a_recipe_whose_every_run_diverged_has_no_curve_and_everything_else_is_written(tmp_path):
    lost = [dataclasses.replace(run, metrics={"top1": NAN, "eval_loss": NAN}) for run in SWEEP if run.recipe == "fast"]
    assert _report([*SWEEP[:3], *lost, record("slow", 1.0, 300.0, 0.6)], tmp_path) == set(OUTPUTS)
    assert {row["recipe"] for row in _rows(tmp_path / "speedups.csv")} == {"slow"}
    assert [row["status"] for row in _rows(tmp_path / "results.csv")].count("diverged") == 3


def test_a_diverged_baseline_budget_is_named_in_the_speedups(tmp_path):
    runs = [dataclasses.replace(SWEEP[1], metrics={"top1": NAN, "eval_loss": NAN}), *SWEEP[:1], *SWEEP[2:]]
    _report(runs, tmp_path)
    rows = {row["baseline budget"]: row["speedup"] for row in _rows(tmp_path / "speedups.csv")}
    assert rows == {"x0.5": "≥ 2.00x faster to 50.0% top-1", "x2": "2.00x faster to 80.0% top-1",
                    "x1": "no speedup: every run of base at x1 diverged"}
    assert "no speedup: every run of base at x1 diverged" in (tmp_path / "speedups.md").read_text()
    assert "On m/cpu: no speedup: every run of base at x1 diverged." in (tmp_path / "report.html").read_text()


def test_a_baseline_that_never_finished_leaves_every_recipe_without_a_speedup_saying_why(tmp_path):
    lost = [FailedRun("m/cpu", "base", budget, 0, "failed", "training exited with code 1", "log")
            for budget in (0.5, 1.0)]
    assert _report([*lost, *SWEEP[3:]], tmp_path) == set(OUTPUTS)
    assert [row["speedup"] for row in _rows(tmp_path / "speedups.csv")] == [
        "no speedup: every run of base at x0.5 failed", "no speedup: every run of base at x1 failed"]


def test_when_no_run_finished_the_report_still_lists_every_run(tmp_path):
    runs = [FailedRun("m/cpu", "base", 1.0, 0, "failed", "training exited with code 1", "a.log"),
            dataclasses.replace(SWEEP[0], metrics={"top1": NAN, "eval_loss": 1.0})]
    assert _report(runs, tmp_path) == {"results.json", "results.csv", "report.html"}
    page = (tmp_path / "report.html").read_text()
    assert "No run finished with a usable result" in page and "<td>failed</td>" in page
    assert [run.status for run in read_results(tmp_path)] == ["failed", "diverged"]


def test_results_keep_each_run_s_status_reason_and_log_and_read_back_the_same(tmp_path):
    lost = FailedRun("m/cpu", "fast", 4.0, 1, "diverged", "its summary gives top1 = nan", "/runs/x/train.stderr.log")
    write_results([*SWEEP, lost], tmp_path)
    assert read_results(tmp_path) == [*SWEEP, lost]
    row = _rows(tmp_path / "results.csv")[-1]
    assert (row["status"], row["reason"], row["log"], row["metrics.top1"]) == (
        "diverged", "its summary gives top1 = nan", "/runs/x/train.stderr.log", "")


def test_a_merge_keeps_a_run_that_finished_over_the_same_run_left_out_elsewhere():
    lost = FailedRun("m/cpu", "base", 0.5, 0, "failed", "training exited with code 1")
    assert merge_records([[lost], SWEEP]) == SWEEP
    with pytest.warns(UserWarning, match="appears more than once"):
        assert merge_records([[lost], [lost]]) == [lost]


RUN = PlannedRun("cifar_mild", 1.0, 0, 8.0)


def _run_folder(tmp_path, summary_text):
    folder = tmp_path / RUN.folder_name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(to_dict(run_config(RUN, []))))
    if summary_text is not None:
        (folder / "summary.json").write_text(summary_text)
    return folder


GOOD = fakes.summary(["--recipe", "cifar_mild", "--budget", "1.0"])


@pytest.mark.parametrize("text, says", [
    ("{not json", "Expecting property name"),
    ("[1, 2]", "must be a JSON object"),
    ('{"metrics": {"top1": 0.5}}', "lacks metric, higher_is_better"),
    (json.dumps({**GOOD, "train_seconds": "fast"}), "train_seconds must be a number >= 0, got str 'fast'"),
    (json.dumps({**GOOD, "train_seconds": NAN}), "train_seconds must be a number >= 0, got nan"),
    (json.dumps({**GOOD, "steps": 2.5}), "steps must be an int >= 0, got float 2.5"),
    (json.dumps({**GOOD, "metrics": [0.5]}), "metrics must be a JSON object of numbers"),
    (json.dumps({**GOOD, "metrics": {"top1": "high"}}), "metrics['top1'] must be a number"),
    ('{"__class__": "os.system", "metrics": "rm -rf /"}', "lacks"),  # data, never code
    ('{"metrics": ' + "[" * 100_000, "deeper than Python's recursion limit"),
], ids=["not-json", "a-list", "missing-fields", "a-word-for-seconds", "nan-seconds", "fractional-steps",
        "metrics-a-list", "a-word-for-a-metric", "code-like", "nested-100000-deep"])
def test_an_unreadable_summary_is_a_failed_run_naming_the_file(tmp_path, text, says):
    folder = _run_folder(tmp_path, text)
    outcome = read_outcome(RUN, folder, 0)
    assert outcome.status == "failed" and outcome.log == str(folder / "train.stderr.log")
    assert str(folder / "summary.json") in outcome.reason and says in outcome.reason
    assert "delete the folder" in outcome.reason


@pytest.mark.parametrize("code, reason", [(1, "training exited with code 1: RuntimeError: boom"),
                                          (-9, "training was killed by signal 9: RuntimeError: boom")])
def test_a_run_that_exited_with_an_error_is_failed_with_the_last_line_of_its_stderr(tmp_path, code, reason):
    folder = _run_folder(tmp_path, None)
    (folder / "train.stderr.log").write_text("Traceback (most recent call last):\nRuntimeError: boom\n\n")
    assert read_outcome(RUN, folder, code).reason == reason
    assert "no summary.json" in read_outcome(RUN, folder, 0).reason  # exit 0 without a summary


def test_a_sweep_goes_on_past_bad_runs_reports_them_and_a_rerun_retries_only_the_failed(data, tmp_path, monkeypatch,
                                                                                        capsys):
    fake_train = fakes.install(monkeypatch)
    fake_train.fates = {"cifar_baseline-x0.5-s0": fakes.FAIL, "cifar_mild-x1-s0": fakes.NAN}
    out = tmp_path / "report"
    args = ["--recipes", "cifar_baseline,cifar_mild", "--budgets", "0.5,1", "--data", str(data), "--out", str(out),
            "--no-progress"]
    assert main(args) == 1
    captured = capsys.readouterr()
    error, = captured.err.splitlines()
    failed_log = out.resolve() / "runs" / "cifar_baseline-x0.5-s0" / "train.stderr.log"
    assert error.startswith("error: 1 of 4 runs failed and 1 diverged, left out of the report: ")
    assert f"cifar_baseline x0.5 seed 0 (failed; log: {failed_log})" in error
    assert "cifar_mild x1 seed 0 (diverged; log: " in error and error.endswith("retry the failed runs")
    assert "cifar_baseline x0.5 seed 0: failed: training exited with code 1: RuntimeError: boom" in captured.out
    assert all((out / name).stat().st_size > 0 for name in OUTPUTS)
    assert [row["status"] for row in _rows(out / "results.csv")] == ["failed", "finished", "finished", "diverged"]
    assert str(failed_log) in (out / "report.html").read_text()
    # The same command again: the failed run is retried, the diverged one (a result) is not.
    fake_train.commands.clear()
    fake_train.fates = {}
    assert main(args) == 0
    assert [fakes.flag(command, "--out") for command in fake_train.commands] == [str(failed_log.parent)]
    note, = capsys.readouterr().err.splitlines()
    assert note.startswith("note: 1 of 4 runs diverged and are left out of the curves: cifar_mild x1 seed 0")
