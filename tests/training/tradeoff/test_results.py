"""Run records from both summary.json formats, and results.json/.csv written and read back (old files included)."""

import csv
import json
from pathlib import Path

import pytest

from fastcore_ops.training.config import to_dict
from fastcore_ops.training.recipes import get_recipe
from fastcore_ops.training.tradeoff.metric import Metric
from fastcore_ops.training.tradeoff.machine import MACHINE_FILE
from fastcore_ops.training.tradeoff.results import RunRecord, common_metric, read_results, read_run, write_results

# A summary.json as runs wrote it before they named their metric: top-1 and the loss at the top level, images/s.
OLD_SUMMARY = {"top1": 0.6125, "eval_loss": 1.1453, "steps": 546, "epochs_seen": 14, "train_seconds": 83.72,
               "first_epoch_seconds": 4.15, "images_per_second": 834.786,
               "phase_seconds": {"data": 4.22, "forward": 31.84, "backward": 45.1626, "optimizer": 1.49,
                                 "methods": 0.94}}
LM_SUMMARY = {"metrics": {"eval_loss": 1.23, "bits_per_byte": 1.77, "perplexity": 3.42},
              "metric": "eval_loss", "higher_is_better": False, "metric_label": "validation loss (nats/token)",
              "steps": 600, "epochs_seen": 3, "train_seconds": 240.5, "first_epoch_seconds": 80.1,
              "samples_per_second": 5120.0, "sample_unit": "tokens", "phase_seconds": {"data": 1.0, "forward": 50.0}}


def _run_folder(folder: Path, summary: dict | None = None) -> Path:
    """A finished run's folder: its summary, a real recipe's configuration and the machine label."""
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps(OLD_SUMMARY if summary is None else summary))
    (folder / "config.json").write_text(json.dumps(to_dict(get_recipe("cifar_mild"))))
    (folder / MACHINE_FILE).write_text("host/cpu\n")
    return folder


def test_an_old_summary_is_read_as_top1_higher_is_better_in_images(tmp_path):
    record = read_run(_run_folder(tmp_path / "run"), recipe="cifar_mild", budget=1.0, seed=0)
    assert (record.metric, record.higher_is_better, record.metric_label) == ("top1", True, "top-1 (%)")
    assert record.quality == 0.6125 and record.metrics == {"top1": 0.6125, "eval_loss": 1.1453}
    assert record.samples_per_second == pytest.approx(834.786) and record.sample_unit == "images"
    assert record.steps == 546 and record.phase_seconds["backward"] == pytest.approx(45.1626)
    assert record.machine == "host/cpu" and len(record.config_hash) == 12


def test_a_new_summary_carries_its_metric_direction_label_and_throughput_unit(tmp_path):
    record = read_run(_run_folder(tmp_path / "run", LM_SUMMARY), recipe="gpt_small", budget=0.5, seed=1)
    assert record.quality_metric == Metric("eval_loss", False, "validation loss (nats/token)")
    assert record.quality == 1.23 and record.metrics["perplexity"] == 3.42
    assert (record.samples_per_second, record.sample_unit) == (5120.0, "tokens")
    assert (record.steps, record.train_seconds, record.first_epoch_seconds) == (600, 240.5, 80.1)
    assert record.phase_seconds == {"data": 1.0, "forward": 50.0}
    assert record.precision == ""  # a summary from before runs recorded their precision
    precise = read_run(_run_folder(tmp_path / "bf16", LM_SUMMARY | {"precision": "bf16 autocast"}),
                       recipe="gpt_small", budget=0.5, seed=1)
    assert precise.precision == "bf16 autocast"


@pytest.mark.parametrize("change, message", [
    ({"sample_unit": None}, "lacks sample_unit"),
    ({"metric": "top1"}, "its metric 'top1' is not among its metrics (eval_loss, bits_per_byte, perplexity)"),
    ({"higher_is_better": "false"}, "higher_is_better must be True or False, got 'false'"),
    ({"steps_by_threads": {"2": 1.5}}, "steps_by_threads['2']"),
    ({"steps_by_threads": [600]}, "steps_by_threads must be a JSON object of counts"),
])
def test_a_summary_that_cannot_be_read_is_named_with_what_is_wrong(tmp_path, change, message):
    summary = {key: value for key, value in {**LM_SUMMARY, **change}.items() if value is not None}
    folder = _run_folder(tmp_path / "run", summary)
    with pytest.raises(ValueError, match="summary.json") as refused:
        read_run(folder, recipe="gpt_small", budget=1.0, seed=0)
    assert message in str(refused.value)


def test_results_round_trip_with_metrics_flattened_in_the_csv(tmp_path):
    summary = LM_SUMMARY | {"steps_by_threads": {"1": 450, "2": 150}}  # resumed on another thread count
    lm = read_run(_run_folder(tmp_path / "run", summary), recipe="gpt_small", budget=0.5, seed=1)
    write_results([lm], tmp_path / "out")
    assert read_results(tmp_path / "out") == [lm]
    with open(tmp_path / "out" / "results.csv") as file:
        row, = csv.DictReader(file)
    assert row["metric"] == "eval_loss" and row["higher_is_better"] == "False"
    assert row["metric_label"] == "validation loss (nats/token)" and row["sample_unit"] == "tokens"
    assert (row["metrics.eval_loss"], row["metrics.perplexity"], row["phase.forward"]) == ("1.23", "3.42", "50.0")
    assert "top1" not in row and "images_per_second" not in row
    assert (row["threads.1"], row["threads.2"]) == ("450", "150"), "the steps at each thread count"


def test_an_old_results_json_written_with_top1_is_still_read(tmp_path):
    old_row = {"machine": "laptop/cpu", "recipe": "cifar_mild", "budget": 1.0, "seed": 0, "top1": 0.61,
               "eval_loss": 1.1, "train_seconds": 83.7, "first_epoch_seconds": 4.2, "images_per_second": 834.8,
               "steps": 546, "config_hash": "0123456789ab", "phase_seconds": {"forward": 31.8}}
    (tmp_path / "results.json").write_text(json.dumps([old_row]))
    record, = read_results(tmp_path)
    assert record.quality_metric == Metric("top1", True, "top-1 (%)") and record.quality == 0.61
    assert record.metrics == {"top1": 0.61, "eval_loss": 1.1}
    assert (record.samples_per_second, record.sample_unit, record.setup_hash) == (834.8, "images", "")


def test_a_results_json_of_something_else_is_refused_by_name(tmp_path):
    (tmp_path / "results.json").write_text(json.dumps([{"machine": "m", "recipe": "r"}]))
    with pytest.raises(ValueError, match="results.json is not a list of run records"):
        read_results(tmp_path)


def test_common_metric_names_each_metric_s_recipes(tmp_path):
    top1 = read_run(_run_folder(tmp_path / "a"), recipe="cifar_mild", budget=1.0, seed=0)
    loss = read_run(_run_folder(tmp_path / "b", LM_SUMMARY), recipe="gpt_small", budget=1.0, seed=0)
    assert common_metric([top1, top1]) == Metric("top1", True, "top-1 (%)")
    with pytest.raises(ValueError, match=r"cifar_mild measure top1 .*; gpt_small measure eval_loss "
                                         r"\(validation loss \(nats/token\), lower is better\)"):
        common_metric([top1, loss, top1])
    with pytest.raises(ValueError, match="at least one run"):
        common_metric([])


def test_a_record_s_metric_must_be_among_its_metrics():
    with pytest.raises(ValueError, match="'top1' is not among its metrics"):
        RunRecord(machine="m", recipe="r", budget=1.0, seed=0, metric="top1", higher_is_better=True,
                  metric_label="top-1 (%)", metrics={"eval_loss": 1.0}, train_seconds=1.0, first_epoch_seconds=1.0,
                  samples_per_second=1.0, sample_unit="images", steps=1, config_hash="abc")
