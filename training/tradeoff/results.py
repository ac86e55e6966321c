"""One row per training run: read from a run's folder, written to and read back from CSV and JSON.

``results.json`` is the record the report is rebuilt from (``--merge``); ``results.csv`` is the
same rows for spreadsheets, with the metrics and the time breakdown flattened into
``metrics.<name>`` and ``phase.<name>`` columns. Files written before runs named their metric
(a ``top1`` field, ``images_per_second``) are read as top-1, higher is better, in images.

    >>> write_results(records, out)
    >>> [record.quality for record in read_results(out)][:2]
    [0.5, 0.51]
"""

from __future__ import annotations

import csv
import dataclasses
import json
import socket
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from training.config import config_hash, load_config
from training.tradeoff.metric import TOP1, Metric, direction, one_metric

RESULTS_JSON = "results.json"
RESULTS_CSV = "results.csv"
MACHINE_FILE = "machine.txt"  # written into each run folder by the sweep
# What a summary.json has to hold (after upgrade_legacy) for a record to be built from it.
SUMMARY_KEYS = ("metrics", "metric", "higher_is_better", "metric_label", "steps", "train_seconds",
                "first_epoch_seconds", "samples_per_second", "sample_unit")


@dataclass(frozen=True)
class RunRecord:
    """A finished run: what was trained, where, and what it measured (times in training seconds).

    metric: the name, among ``metrics``, of the value the run is judged by ("top1", "eval_loss");
        ``higher_is_better`` and ``metric_label`` ("validation loss (nats/token)") go with it.
    samples_per_second: training throughput, counted in ``sample_unit`` ("images", "tokens").
    """

    machine: str
    recipe: str
    budget: float
    seed: int
    metric: str
    higher_is_better: bool
    metric_label: str
    metrics: dict[str, float]
    train_seconds: float
    first_epoch_seconds: float
    samples_per_second: float
    sample_unit: str
    steps: int
    config_hash: str
    phase_seconds: dict[str, float] = field(default_factory=dict)
    # The configuration's hash with seed and budget left out: one value along a whole curve.
    setup_hash: str = ""
    compile_seconds: float = 0.0  # torch.compile's time, not in train_seconds

    def __post_init__(self):
        direction(self.higher_is_better)
        if self.metric not in self.metrics:
            raise ValueError(f"run {self.key}: its metric {self.metric!r} is not among its metrics "
                             f"({', '.join(self.metrics) or 'none'}); name one of those as the metric")

    @property
    def key(self) -> tuple[str, str, float, int]:
        return (self.machine, self.recipe, self.budget, self.seed)

    @property
    def quality(self) -> float:
        """The value of the run's own metric."""
        return self.metrics[self.metric]

    @property
    def quality_metric(self) -> Metric:
        """The run's metric with its direction and label."""
        return Metric(self.metric, self.higher_is_better, self.metric_label)


def upgrade_legacy(fields: dict) -> dict:
    """A summary.json or results.json row written before runs named their metric, in today's field names.

    Those measured top-1 (higher is better) and images per second; anything else is returned as it is.

    Example:
        >>> upgrade_legacy({"top1": 0.6, "eval_loss": 1.1, "images_per_second": 800.0, "steps": 5})
        {'steps': 5, 'metrics': {'top1': 0.6, 'eval_loss': 1.1}, 'metric': 'top1', 'higher_is_better': True, 'metric_label': 'top-1 (%)', 'samples_per_second': 800.0, 'sample_unit': 'images'}
    """
    if not isinstance(fields, dict):
        raise TypeError(f"a run's fields must be a JSON object, got {type(fields).__name__}")
    if "metric" in fields or "top1" not in fields:
        return dict(fields)
    upgraded = {name: value for name, value in fields.items() if name not in ("top1", "eval_loss", "images_per_second")}
    upgraded["metrics"] = {name: fields[name] for name in ("top1", "eval_loss") if name in fields}
    upgraded.update(metric=TOP1.name, higher_is_better=TOP1.higher_is_better, metric_label=TOP1.label)
    if "images_per_second" in fields:
        upgraded.update(samples_per_second=fields["images_per_second"], sample_unit="images")
    return upgraded


def common_metric(records: Iterable[RunRecord]) -> Metric:
    """The one metric all ``records`` are judged by; runs of different metrics cannot share a report (ValueError).

    Example:
        >>> common_metric(records)
        Metric(name='top1', higher_is_better=True, label='top-1 (%)')
    """
    return one_metric((record.recipe, record.quality_metric) for record in records)


def machine_label(device: str) -> str:
    """``"<hostname>/<device name>"``: the hardware a run's times belong to.

    Example:
        >>> machine_label("cpu").endswith("/cpu")
        True
    """
    parsed = torch.device(device)
    name = torch.cuda.get_device_name(parsed) if parsed.type == "cuda" else parsed.type
    return f"{socket.gethostname()}/{name}"


def read_run(folder: Path, *, recipe: str, budget: float, seed: int) -> RunRecord:
    """The record of the finished run in ``folder`` (its summary.json, config.json and machine label).

    Reads summaries of both formats: the one naming its metric and the older top-1-only one.
    """
    summary_path = folder / "summary.json"
    if not summary_path.is_file():
        raise FileNotFoundError(f"run folder {folder}: no summary.json; the run has not finished")
    try:
        summary = upgrade_legacy(json.loads(summary_path.read_text()))
    except (TypeError, ValueError) as error:
        raise ValueError(f"{summary_path} is not a run summary ({error}); rerun the run with python -m training.train") from None
    config = load_config(folder / "config.json")
    setup = dataclasses.replace(config, seed=0, schedule=dataclasses.replace(config.schedule, scale_schedule_ratio=1.0))
    missing = [key for key in SUMMARY_KEYS if key not in summary]
    if missing:
        raise ValueError(f"{summary_path} lacks {', '.join(missing)}; it holds {', '.join(summary) or 'nothing'}. "
                         f"Rerun the run with python -m training.train, which writes them")
    machine_path = folder / MACHINE_FILE
    machine = machine_path.read_text().strip() if machine_path.is_file() else "unknown/unknown"
    try:
        return RunRecord(machine=machine, recipe=recipe, budget=budget, seed=seed, metric=summary["metric"],
                         higher_is_better=summary["higher_is_better"], metric_label=summary["metric_label"],
                         metrics=dict(summary["metrics"]), train_seconds=summary["train_seconds"],
                         first_epoch_seconds=summary["first_epoch_seconds"],
                         samples_per_second=summary["samples_per_second"], sample_unit=summary["sample_unit"],
                         steps=summary["steps"], config_hash=config_hash(config),
                         phase_seconds=dict(summary.get("phase_seconds", {})), setup_hash=config_hash(setup),
                         compile_seconds=summary.get("compile_seconds", 0.0))
    except (TypeError, ValueError) as error:
        raise ValueError(f"{summary_path}: {error}") from None


def write_results(records: Sequence[RunRecord], out: Path) -> None:
    """Write ``results.json`` and ``results.csv`` for ``records`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    rows = [dataclasses.asdict(record) for record in records]
    (out / RESULTS_JSON).write_text(json.dumps(rows, indent=2) + "\n")
    flattened = {"metrics": "metrics", "phase_seconds": "phase"}  # dict field -> column prefix
    columns = [f.name for f in dataclasses.fields(RunRecord) if f.name not in flattened]
    nested = [(name, prefix, sorted({key for row in rows for key in row[name]}))
              for name, prefix in flattened.items()]
    with open(out / RESULTS_CSV, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(columns + [f"{prefix}.{key}" for _, prefix, keys in nested for key in keys])
        for row in rows:
            writer.writerow([row[name] for name in columns] +
                            [row[name].get(key, "") for name, _, keys in nested for key in keys])


def read_results(folder: Path) -> list[RunRecord]:
    """The records in ``folder/results.json`` (a sweep's or a merge's output folder)."""
    path = folder / RESULTS_JSON
    if not path.is_file():
        raise FileNotFoundError(f"--merge {folder}: no {RESULTS_JSON}; pass folders written by "
                                f"python -m training.tradeoff --out")
    try:
        rows = json.loads(path.read_text())
        return [RunRecord(**upgrade_legacy(row)) for row in rows]
    except (ValueError, TypeError) as error:  # bad JSON, missing or unknown fields, a record that contradicts itself
        raise ValueError(f"--merge {folder}: {RESULTS_JSON} is not a list of run records ({error})") from None


def merge_records(groups: Iterable[Sequence[RunRecord]]) -> list[RunRecord]:
    """All records, each (machine, recipe, budget, seed) once.

    The same run found twice (same configuration hash, e.g. a folder merged twice) is kept once
    with a warning; two different configurations under one key cannot share a curve and raise.

    Example:
        >>> merge_records([[]])
        []
    """
    merged: dict[tuple, RunRecord] = {}
    for records in groups:
        for record in records:
            kept = merged.get(record.key)
            if kept is None:
                merged[record.key] = record
            elif kept.config_hash == record.config_hash:
                warnings.warn(f"run {record.key} appears more than once; keeping the first", stacklevel=2)
            else:
                raise ValueError(f"run {record.key} appears with two configurations ({kept.config_hash} and "
                                 f"{record.config_hash}); merge only folders that ran the same recipes")
    return list(merged.values())
