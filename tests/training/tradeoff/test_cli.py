"""The command line: bad input refused before any training, a partial report when stopped, and --merge."""

import csv
import json
import signal

import pytest

from training.tradeoff import cli
from training.tradeoff.cli import main
from training.tradeoff.results import RunRecord, read_run, write_results
from training.tradeoff.sweep import SweepInterrupted


@pytest.fixture
def data(tmp_path):
    for split in ("train", "test"):
        (tmp_path / "data" / split).mkdir(parents=True)
    return tmp_path / "data"


@pytest.mark.parametrize("args, message", [
    (["--recipes", "cifar_spicy", "--budgets", "1"], "unknown recipe 'cifar_spicy'"),
    (["--recipes", "cifar_mild,cifar_mild", "--budgets", "1"], "named twice"),
    (["--recipes", "cifar_mild", "--budgets", "0"], "'0' is not a budget"),
    (["--recipes", "cifar_mild", "--budgets", "0.5,-1"], "'-1' is not a budget"),
    (["--recipes", "cifar_mild", "--budgets", "x"], "'x' is not a budget"),
    (["--recipes", "cifar_mild", "--budgets", "inf"], "'inf' is not a budget"),
    (["--recipes", "cifar_mild", "--budgets", "1", "--seeds", "0"], "--seeds must be >= 1"),
    (["--recipes", "cifar_mild", "--budgets", "1", "--subset", "0"], "--subset must be >= 1"),
    (["--recipes", "cifar_mild", "--budgets", "1", "--set", "optimizer.beta=1"], "unknown field 'beta'"),
    (["--recipes", "cifar_mild", "--budgets", "1", "--set", "seed=3"], "use --seeds and --budgets"),
    (["--recipes", "cifar_mild", "--budgets", "1", "--baseline", "cifar_hot"], "--baseline 'cifar_hot'"),
    (["--budgets", "1"], "--recipes is required"),
    (["--recipes", "cifar_mild"], "--budgets is required"),
])
def test_bad_sweep_input_is_refused_before_any_training(args, message, data, tmp_path, capsys):
    assert main([*args, "--data", str(data), "--out", str(tmp_path / "report")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "report").exists()


def test_a_missing_data_folder_is_refused(tmp_path, capsys):
    args = ["--recipes", "cifar_mild", "--budgets", "1", "--data", str(tmp_path / "nowhere"), "--out", str(tmp_path)]
    assert main(args) == 2
    assert "no such folder" in capsys.readouterr().err


def test_merge_refuses_folders_without_results_and_sweep_options(data, tmp_path, capsys):
    assert main(["--merge", str(tmp_path), "--out", str(tmp_path / "merged")]) == 2
    assert "no results.json" in capsys.readouterr().err
    assert main(["--merge", str(tmp_path), "--recipes", "cifar_mild", "--out", str(tmp_path / "merged")]) == 2
    assert "takes no --recipes" in capsys.readouterr().err
    assert main(["--merge", str(tmp_path), "--set", "seed=1", "--out", str(tmp_path / "merged")]) == 2
    assert "takes no --set" in capsys.readouterr().err
    assert not (tmp_path / "merged").exists()


def _record(machine, recipe, budget, seconds, top1):
    return RunRecord(machine=machine, recipe=recipe, budget=budget, seed=0, top1=top1, eval_loss=1.0,
                     train_seconds=seconds, first_epoch_seconds=seconds / 4, images_per_second=50.0, steps=100,
                     config_hash=f"{recipe}{budget}"[:12],
                     phase_seconds={"data": 0.1 * seconds, "forward": 0.3 * seconds, "backward": 0.5 * seconds,
                                    "optimizer": 0.05 * seconds, "methods": 0.05 * seconds})


def test_merge_rebuilds_every_output_and_keeps_each_machine_apart(tmp_path, capsys):
    laptop = [_record("laptop/cpu", "cifar_baseline", 0.5, 100.0, 0.60), _record("laptop/cpu", "cifar_baseline", 1, 200.0, 0.70),
              _record("laptop/cpu", "cifar_mild", 0.5, 50.0, 0.65), _record("laptop/cpu", "cifar_mild", 1, 100.0, 0.75),
              _record("laptop/cpu", "cifar_hot", 1, 400.0, 0.50)]
    gpu = [_record("gpu/NVIDIA H100", "cifar_baseline", 1, 10.0, 0.70), _record("gpu/NVIDIA H100", "cifar_mild", 1, 8.0, 0.70)]
    write_results(laptop, tmp_path / "laptop")
    write_results(gpu, tmp_path / "gpu")
    out = tmp_path / "merged"
    assert main(["--merge", str(tmp_path / "laptop"), str(tmp_path / "gpu"), "--out", str(out)]) == 0
    for name in ("results.csv", "results.json", "speedups.csv", "breakdown.csv", "pareto.png", "breakdown.png",
                 "report.html"):
        assert (out / name).stat().st_size > 0, name
    assert len(json.loads((out / "results.json").read_text())) == 7
    with open(out / "speedups.csv") as file:
        rows = {(r["machine"], r["recipe"], r["baseline budget"]): r for r in csv.DictReader(file)}
    # Laptop: mild reaches 60% below its cheapest point (<= 50 s: >= 2x), 70% at 75 s (200/75 = 2.67x).
    assert rows[("laptop/cpu", "cifar_mild", "x0.5")]["speedup"] == "≥ 2.00x faster to 60.0%"
    assert rows[("laptop/cpu", "cifar_mild", "x1")]["speedup"] == "2.67x faster to 70.0%"
    # At the baseline's 100 s mild has 75%: +15 points; at 200 s it is past its last run.
    assert rows[("laptop/cpu", "cifar_mild", "x0.5")]["top-1 gain at baseline time (pp)"] == "+15.00"
    # GPU: its own baseline (10 s), never the laptop's.
    assert rows[("gpu/NVIDIA H100", "cifar_mild", "x1")]["speedup"] == "≥ 1.25x faster to 70.0%"
    assert rows[("laptop/cpu", "cifar_hot", "x1")]["speedup"] == "does not reach 70.0%"
    page = (out / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 2
    assert "<b>cifar_hot</b> on laptop/cpu: <span class=\"no\">does not beat the baseline" in page
    assert "report.html" in capsys.readouterr().out


def test_a_stopped_sweep_reports_the_runs_finished_so_far(data, tmp_path, monkeypatch, capsys):
    def stopped_after_two_runs(plan, runs_folder, options, *, progress, on_finished):
        for run in plan[:2]:
            on_finished(run, runs_folder / run.folder_name, True)
        raise SweepInterrupted(signal.SIGTERM, "stopped; rerun the same command to continue")

    monkeypatch.setattr(cli, "run_sweep", stopped_after_two_runs)
    monkeypatch.setattr(cli, "read_run", lambda folder, *, recipe, budget, seed: _record(
        "host/cpu", recipe, budget, 100.0 * budget, 0.5 + 0.1 * budget))
    out = tmp_path / "report"
    args = ["--recipes", "cifar_baseline,cifar_mild", "--budgets", "0.5,1", "--data", str(data), "--out", str(out)]
    assert main(args) == 128 + signal.SIGTERM
    assert "partial report of the 2 runs finished so far" in capsys.readouterr().err
    assert [(r["recipe"], r["budget"]) for r in json.loads((out / "results.json").read_text())] == [
        ("cifar_baseline", 0.5), ("cifar_baseline", 1.0)]
    assert (out / "report.html").is_file()


@pytest.mark.parametrize("text", ["{not json", '{"optimizer": {"lr": "__import__(\'os\')"}}'],
                         ids=["not-json", "code-in-a-value"])
def test_a_run_folder_s_configuration_is_read_as_data_and_a_bad_one_is_named(tmp_path, text):
    (tmp_path / "summary.json").write_text("{}")
    (tmp_path / "config.json").write_text(text)
    with pytest.raises(ValueError, match=f"the configuration {tmp_path / 'config.json'}"):
        read_run(tmp_path, recipe="cifar_mild", budget=1.0, seed=0)
