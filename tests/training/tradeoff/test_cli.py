"""The command line: bad input refused before any training, a partial report when stopped, and --merge."""

import csv
import dataclasses
import json
import signal

import pytest

from fastcore_ops.training.tradeoff import sweep
from fastcore_ops.training.tradeoff.cli import main
from fastcore_ops.training.tradeoff.metric import TOP1, Metric
from fastcore_ops.training.tradeoff.results import RunRecord, read_run, write_results


@pytest.mark.parametrize("args, message", [
    (["--recipes", "cifar_spicy", "--budgets", "1"], "--recipes cifar_spicy: no such recipe"),
    (["--recipes", "cifar_mild,cifar_mild", "--budgets", "1"], "named twice"),
    (["--recipes", "cifar_mild", "--budgets", "0"], "'0' is not a budget"),
    (["--recipes", "cifar_mild", "--budgets", "0.5,-1"], "'-1' is not a budget"),
    (["--recipes", "cifar_mild", "--budgets", "x"], "'x' is not a budget"),
    (["--recipes", "cifar_mild", "--budgets", "inf"], "'inf' is not a budget"),
    (["--recipes", "cifar_mild", "--budgets", "1", "--seeds", "0"], "argument --seeds: must be a whole number >= 1"),
    (["--recipes", "cifar_mild", "--budgets", "1", "--first-seed", "-1"],
     "argument --first-seed: must be a whole number >= 0"),
    (["--recipes", "cifar_mild", "--budgets", "1", "--subset", "0"], "argument --subset: must be a whole number >= 1"),
    (["--recipes", "cifar_mild", "--budgets", "1", "--set", "optimizer.beta=1"], "unknown field 'beta'"),
    (["--recipes", "cifar_mild", "--budgets", "1", "--set", "seed=3"], "use --seeds and --budgets"),
    (["--recipes", "cifar_mild", "--budgets", "1", "--baseline", "cifar_hot"],
     "--baseline cifar_hot: no such recipe among those compared; known: cifar_mild"),
    (["--budgets", "1"], "--recipes is required"),
    (["--recipes", "cifar_mild"], "--budgets is required"),
    (["--recipes", "cifar_baseline,gpt_baseline", "--budgets", "1"],
     "cifar_baseline measure top1 (top-1 (%), higher is better); gpt_baseline measure eval_loss"),
    (["--recipes", "gpt_baseline", "--budgets", "1", "--subset", "5"], "recipe gpt_baseline: --subset (samples per "
                                                                     "class) does not apply to task 'language_model'"),
])
def test_bad_sweep_input_is_refused_before_any_training(args, message, data, tmp_path, capsys):
    assert main([*args, "--data", str(data), "--out", str(tmp_path / "report")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "report").exists()


def test_a_missing_data_folder_is_refused(tmp_path, capsys):
    args = ["--recipes", "cifar_mild", "--budgets", "1", "--data", str(tmp_path / "nowhere"), "--out", str(tmp_path)]
    assert main(args) == 2
    assert "no such folder" in capsys.readouterr().err


def test_image_recipes_need_data_and_language_models_do_not(tmp_path, monkeypatch, capsys):
    args = ["--recipes", "cifar_mild", "--budgets", "1", "--out", str(tmp_path / "report")]
    assert main(args) == 2
    assert "recipe cifar_mild: --data is required for image classification" in capsys.readouterr().err
    given = []
    monkeypatch.setattr(sweep, "run_sweep", lambda plan, **_: given.append(plan))
    monkeypatch.setattr(sweep, "build_report", lambda records, out, baseline: [out / "report.html"])
    assert main(["--recipes", "gpt_baseline", "--budgets", "1", "--out", str(tmp_path / "lm")]) == 0
    (plan,) = given
    assert [run.recipe for run in plan.runs] == ["gpt_baseline"] and plan.options.data is None


def test_first_seed_moves_the_sweep_to_seeds_no_search_has_seen(tmp_path, monkeypatch):
    given = []
    monkeypatch.setattr(sweep, "run_sweep", lambda plan, **_: given.append(plan.runs))
    monkeypatch.setattr(sweep, "build_report", lambda records, out, baseline: [out / "report.html"])
    assert main(["--recipes", "gpt_baseline", "--budgets", "1", "--seeds", "3", "--first-seed", "2",
                 "--out", str(tmp_path / "lm")]) == 0
    (runs,) = given
    assert [run.seed for run in runs] == [2, 3, 4] and runs[0].folder_name == "gpt_baseline-x1-s2"


def test_merge_refuses_folders_without_results_and_sweep_options(data, tmp_path, capsys):
    assert main(["--merge", str(tmp_path), "--out", str(tmp_path / "merged")]) == 2
    assert "no results.json" in capsys.readouterr().err
    assert main(["--merge", str(tmp_path), "--recipes", "cifar_mild", "--out", str(tmp_path / "merged")]) == 2
    assert "takes no --recipes" in capsys.readouterr().err
    assert main(["--merge", str(tmp_path), "--set", "seed=1", "--out", str(tmp_path / "merged")]) == 2
    assert "takes no --set" in capsys.readouterr().err
    assert not (tmp_path / "merged").exists()


def test_the_cost_pass_refuses_a_set_that_applies_to_no_run_before_anything_is_timed(data, tmp_path, capsys):
    write_results([RunRecord.made_up("cifar_mild", 1.0, 2)], tmp_path / "sweep")
    assert main(["--cost", str(tmp_path / "sweep"), "--set", "methods.no_such_method={}", "--data", str(data),
                 "--out", str(tmp_path / "costed")]) == 2
    assert "--set methods.no_such_method={}" in capsys.readouterr().err
    assert not (tmp_path / "costed").exists()


LOSS = Metric("eval_loss", higher_is_better=False, label="validation loss (nats/token)")


def _record(machine, recipe, budget, seconds, quality, metric=TOP1):
    return RunRecord.made_up(recipe, budget, quality=quality, seconds=seconds, metric=metric, machine=machine,
                             first_epoch_seconds=seconds / 4, samples_per_second=50.0,
                             sample_unit="images" if metric == TOP1 else "tokens", config_hash=f"{recipe}{budget}"[:12],
                             phases={"data": 0.1 * seconds, "forward": 0.3 * seconds, "backward": 0.5 * seconds,
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
    for name in ("results.csv", "results.json", "speedups.csv", "speedups.md", "breakdown.csv", "pareto.png",
                 "breakdown.png", "report.html"):
        assert (out / name).stat().st_size > 0, name
    assert len(json.loads((out / "results.json").read_text())) == 7
    with open(out / "speedups.csv") as file:
        rows = {(r["machine"], r["recipe"], r["baseline budget"]): r for r in csv.DictReader(file)}
    # Laptop: mild reaches 60% below its cheapest point (<= 50 s: >= 2x), 70% at 75 s (200/75 = 2.67x).
    assert rows[("laptop/cpu", "cifar_mild", "x0.5")]["speedup"] == "≥ 2.00x faster to 60.0% top-1"
    assert rows[("laptop/cpu", "cifar_mild", "x1")]["speedup"] == "2.67x faster to 70.0% top-1"
    # At the baseline's 100 s mild has 75%: +15 points; at 200 s it is past its last run.
    assert rows[("laptop/cpu", "cifar_mild", "x0.5")]["top-1 gain at baseline time (pp)"] == "+15.00"
    # GPU: its own baseline (10 s), never the laptop's.
    assert rows[("gpu/NVIDIA H100", "cifar_mild", "x1")]["speedup"] == "≥ 1.25x faster to 70.0% top-1"
    assert rows[("laptop/cpu", "cifar_hot", "x1")]["speedup"] == "does not reach 70.0% top-1"
    # The README's copy: two machines, so each row keeps its machine.
    markdown = (out / "speedups.md").read_text()
    assert markdown.startswith("7 runs of cifar_baseline, cifar_mild, cifar_hot on gpu/NVIDIA H100, laptop/cpu;")
    assert "| laptop/cpu | cifar_mild | x1 | 70.00 | 200.0 | 75.0 | 2.67x faster to 70.0% top-1 |" in markdown
    page = (out / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 2
    assert "<b>cifar_hot</b> on laptop/cpu: <span class=\"no\">does not beat the baseline" in page
    assert "report.html" in capsys.readouterr().out


def test_judge_draws_a_recipe_by_another_metric_as_a_curve_of_its_own(tmp_path, capsys):
    """Mild with test-time augmentation against the baseline without: its top1_tta on a curve of its own."""
    runs = [_record("m/cpu", "cifar_baseline", 1, 200.0, 0.70), _record("m/cpu", "cifar_baseline", 2, 400.0, 0.74)]
    for budget, seconds, top1 in ((0.5, 50.0, 0.66), (1, 100.0, 0.72)):
        mild = _record("m/cpu", "cifar_mild", budget, seconds, top1)
        runs.append(dataclasses.replace(mild, metrics={**mild.metrics, "top1_tta": top1 + 0.02}))
    write_results(runs, tmp_path / "runs")
    out = tmp_path / "judged"
    assert main(["--merge", str(tmp_path / "runs"), "--judge", "cifar_mild=top1_tta", "--out", str(out)]) == 0
    with open(out / "speedups.csv") as file:
        rows = {(r["recipe"], r["baseline budget"]): r["speedup"] for r in csv.DictReader(file)}
    # Without TTA mild reaches 70% at 83.3 s (2.40x); with it, 70% at 66.7 s (3.00x).
    assert rows[("cifar_mild", "x1")] == "2.40x faster to 70.0% top-1"
    assert rows[("cifar_mild by top1_tta", "x1")] == "3.00x faster to 70.0% top-1"
    for judge, message in (("cifar_mild=top5", "run cifar_mild x0.5 seed 0 reports no 'top5'"),
                           ("cifar_hot=top1_tta", "no run of 'cifar_hot' among the runs"),
                           ("cifar_mild", "--judge expects RECIPE=METRIC")):
        assert main(["--merge", str(tmp_path / "runs"), "--judge", judge, "--out", str(tmp_path / "no")]) == 2
        assert message in capsys.readouterr().err
    assert main(["--cost", str(tmp_path / "runs"), "--judge", "cifar_mild=top1_tta", "--out", str(tmp_path / "no")]) == 2
    assert "--judge goes with --merge" in capsys.readouterr().err
    assert not (tmp_path / "no").exists()


def test_a_stopped_sweep_reports_the_runs_finished_so_far(data, tmp_path, monkeypatch, capsys):
    def stopped_after_two_runs(plan, *, on_finished):
        for run in plan.runs[:2]:
            on_finished(run, plan.out / "runs" / run.folder_name, 0)
        raise sweep.SweepInterrupted(signal.SIGTERM, "stopped; rerun the same command to continue")

    monkeypatch.setattr(sweep, "run_sweep", stopped_after_two_runs)
    monkeypatch.setattr(sweep, "read_outcome", lambda run, folder, code: _record(
        "host/cpu", run.recipe, run.budget, 100.0 * run.budget, 0.5 + 0.1 * run.budget))
    out = tmp_path / "report"
    args = ["--recipes", "cifar_baseline,cifar_mild", "--budgets", "0.5,1", "--data", str(data), "--out", str(out)]
    assert main(args) == 128 + signal.SIGTERM
    assert "partial report of the 2 runs finished so far" in capsys.readouterr().err
    assert [(r["recipe"], r["budget"]) for r in json.loads((out / "results.json").read_text())] == [
        ("cifar_baseline", 0.5), ("cifar_baseline", 1.0)]
    assert (out / "report.html").is_file()


def test_a_loss_merge_reports_in_nats_and_counts_a_lower_loss_as_better(tmp_path):
    # The fast recipe reaches the baseline's 2.0 nats/token at 50 s instead of 100 s.
    runs = [_record("gpu/H100", "gpt_baseline", 1, 100.0, 2.0, LOSS), _record("gpu/H100", "gpt_baseline", 2, 200.0, 1.6, LOSS),
            _record("gpu/H100", "gpt_fast", 0.5, 25.0, 2.4, LOSS), _record("gpu/H100", "gpt_fast", 1, 50.0, 2.0, LOSS),
            _record("gpu/H100", "gpt_fast", 2, 100.0, 1.7, LOSS)]
    write_results(runs, tmp_path / "lm")
    out = tmp_path / "merged"
    assert main(["--merge", str(tmp_path / "lm"), "--out", str(out)]) == 0
    with open(out / "speedups.csv") as file:
        rows = {r["baseline budget"]: r for r in csv.DictReader(file)}
    assert rows["x1"]["speedup"] == "2.00x faster to 2.00 nats/token validation loss"
    # At the baseline's 100 s the fast recipe is at 1.7, the baseline at 2.0.
    assert rows["x1"]["validation loss gain at baseline time (nats/token)"] == "lower by 0.300"
    assert rows["x2"]["speedup"] == "does not reach 1.60 nats/token validation loss"
    page = (out / "report.html").read_text()
    assert "<h1>Quality against training cost: validation loss (nats/token)</h1>" in page
    assert "Speedup over the baseline at equal validation loss" in page and "lower is better" in page
    assert '<b>gpt_fast</b> on gpu/H100: <span class="yes">beats the baseline' in page
    assert "top-1" not in page


def test_merging_results_of_different_metrics_is_refused_naming_recipes_and_metrics(tmp_path, capsys):
    write_results([_record("host/cpu", "cifar_baseline", 1, 100.0, 0.6)], tmp_path / "cifar")
    write_results([_record("host/cpu", "gpt_baseline", 1, 100.0, 2.0, LOSS)], tmp_path / "lm")
    out = tmp_path / "merged"
    assert main(["--merge", str(tmp_path / "cifar"), str(tmp_path / "lm"), "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert "cifar_baseline measure top1 (top-1 (%), higher is better)" in error
    assert "gpt_baseline measure eval_loss (validation loss (nats/token), lower is better)" in error
    assert not out.exists()


def _sweep_reading(monkeypatch, metric_of_recipe):
    """Stand-ins for the sweep: every planned run "finishes" at once, with its recipe's metric."""
    def run_all(plan, *, on_finished):
        for run in plan.runs:
            on_finished(run, plan.out / "runs" / run.folder_name, 0)

    monkeypatch.setattr(sweep, "run_sweep", run_all)
    monkeypatch.setattr(sweep, "read_outcome", lambda run, folder, code: _record(
        "host/cpu", run.recipe, run.budget, 100.0 * run.budget, 1.0 + 0.1 / run.budget, metric_of_recipe[run.recipe]))


def test_the_progress_line_after_each_run_names_the_metric(data, tmp_path, monkeypatch, capsys):
    _sweep_reading(monkeypatch, {"cifar_baseline": LOSS, "cifar_mild": LOSS})
    args = ["--recipes", "cifar_baseline,cifar_mild", "--budgets", "1", "--data", str(data), "--out",
            str(tmp_path / "report"), "--no-progress"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "cifar_mild x1 seed 0: validation loss 1.100 nats/token | train 100.0 s" in out
    assert "top-1" not in out


def test_a_sweep_whose_recipes_measure_different_metrics_stops_with_an_error(data, tmp_path, monkeypatch, capsys):
    _sweep_reading(monkeypatch, {"cifar_baseline": TOP1, "cifar_mild": LOSS})
    args = ["--recipes", "cifar_baseline,cifar_mild", "--budgets", "1", "--data", str(data), "--out", str(tmp_path / "r")]
    assert main(args) == 2
    error = capsys.readouterr().err
    assert "cifar_baseline measure top1" in error and "cifar_mild measure eval_loss" in error
    assert "recipes of one task" in error
    assert not (tmp_path / "r" / "report.html").exists()


@pytest.mark.parametrize("text", ["{not json", '{"optimizer": {"lr": "__import__(\'os\')"}}'],
                         ids=["not-json", "code-in-a-value"])
def test_a_run_folder_s_configuration_is_read_as_data_and_a_bad_one_is_named(tmp_path, text):
    (tmp_path / "summary.json").write_text("{}")
    (tmp_path / "config.json").write_text(text)
    with pytest.raises(ValueError, match=f"the configuration {tmp_path / 'config.json'}"):
        read_run(tmp_path, recipe="cifar_mild", budget=1.0, seed=0)
