"""One row per training run: read from a run's folder, written to and read back from CSV and JSON.

``results.json`` is the record the report is rebuilt from (``--merge``); ``results.csv`` is the
same rows for spreadsheets, with the time breakdown flattened into ``phase.<name>`` columns.

    >>> write_results(records, out)
    >>> [record.top1 for record in read_results(out)][:2]
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

RESULTS_JSON = "results.json"
RESULTS_CSV = "results.csv"
MACHINE_FILE = "machine.txt"  # written into each run folder by the sweep


@dataclass(frozen=True)
class RunRecord:
    """A finished run: what was trained, where, and what it measured (times in training seconds)."""

    machine: str
    recipe: str
    budget: float
    seed: int
    top1: float
    eval_loss: float
    train_seconds: float
    first_epoch_seconds: float
    images_per_second: float
    steps: int
    config_hash: str
    phase_seconds: dict[str, float] = field(default_factory=dict)
    # The configuration's hash with seed and budget left out: one value along a whole curve.
    setup_hash: str = ""

    @property
    def key(self) -> tuple[str, str, float, int]:
        return (self.machine, self.recipe, self.budget, self.seed)


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
    """The record of the finished run in ``folder`` (its summary.json, config.json and machine label)."""
    summary_path = folder / "summary.json"
    if not summary_path.is_file():
        raise FileNotFoundError(f"run folder {folder}: no summary.json; the run has not finished")
    summary = json.loads(summary_path.read_text())
    config = load_config(folder / "config.json")
    setup = dataclasses.replace(config, seed=0, schedule=dataclasses.replace(config.schedule, scale_schedule_ratio=1.0))
    machine_path = folder / MACHINE_FILE
    machine = machine_path.read_text().strip() if machine_path.is_file() else "unknown/unknown"
    return RunRecord(machine=machine, recipe=recipe, budget=budget, seed=seed, top1=summary["top1"],
                     eval_loss=summary["eval_loss"], train_seconds=summary["train_seconds"],
                     first_epoch_seconds=summary["first_epoch_seconds"],
                     images_per_second=summary["images_per_second"], steps=summary["steps"],
                     config_hash=config_hash(config), phase_seconds=dict(summary.get("phase_seconds", {})),
                     setup_hash=config_hash(setup))


def write_results(records: Sequence[RunRecord], out: Path) -> None:
    """Write ``results.json`` and ``results.csv`` for ``records`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    rows = [dataclasses.asdict(record) for record in records]
    (out / RESULTS_JSON).write_text(json.dumps(rows, indent=2) + "\n")
    phases = sorted({name for record in records for name in record.phase_seconds})
    columns = [f.name for f in dataclasses.fields(RunRecord) if f.name != "phase_seconds"]
    with open(out / RESULTS_CSV, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(columns + [f"phase.{name}" for name in phases])
        for record, row in zip(records, rows):
            writer.writerow([row[name] for name in columns] + [record.phase_seconds.get(name, "") for name in phases])


def read_results(folder: Path) -> list[RunRecord]:
    """The records in ``folder/results.json`` (a sweep's or a merge's output folder)."""
    path = folder / RESULTS_JSON
    if not path.is_file():
        raise FileNotFoundError(f"--merge {folder}: no {RESULTS_JSON}; pass folders written by "
                                f"python -m training.tradeoff --out")
    try:
        rows = json.loads(path.read_text())
        return [RunRecord(**row) for row in rows]
    except (json.JSONDecodeError, TypeError) as error:
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
