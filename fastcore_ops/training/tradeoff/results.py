"""One row per training run: read from a run's folder, written to and read back from CSV and JSON.

``results.json`` is the record the report is rebuilt from (``--merge``); ``results.csv`` is the
same rows for spreadsheets, with the metrics, the time breakdown and the steps at each thread count
flattened into ``metrics.<name>``, ``phase.<name>`` and ``threads.<count>`` columns. Every row has a
``status``: ``finished``, or, for a run left out of the curves, ``diverged`` (a NaN or infinite
metric) or ``failed`` (training exited with an error, a summary that cannot be read, no training
time), with the reason and the run's stderr log. Files written before runs named their metric (a ``top1``
field, ``images_per_second``) are read as top-1, higher is better, in images.

Both files, and every run's ``summary.json``, are untrusted input: they are read as JSON
(never unpickled) and every field is checked by :class:`RunRecord` or :class:`FailedRun`.

    >>> write_results(records, out)
    >>> [record.quality for record in read_results(out)][:2]
    [0.5, 0.51]
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fastcore_ops.checks import check_choice, check_int, check_number, check_str
from fastcore_ops.training.config import config_hash, load_config, setup_hash
from fastcore_ops.training.tradeoff.curves import direction
from fastcore_ops.training.tradeoff.machine import read_machine
from fastcore_ops.training.tradeoff.metric import TOP1, Metric, one_metric

RESULTS_JSON = "results.json"
RESULTS_CSV = "results.csv"
# What a summary.json has to hold (after upgrade_legacy) for a record to be built from it.
SUMMARY_KEYS = ("metrics", "metric", "higher_is_better", "metric_label", "steps", "train_seconds",
                "first_epoch_seconds", "samples_per_second", "sample_unit")
FINISHED, DIVERGED, FAILED = "finished", "diverged", "failed"
LEFT_OUT = (DIVERGED, FAILED)  # the statuses of runs kept out of curves, speedups and plots


def _check_values(name: str, values, *, finite: bool) -> None:
    """TypeError unless ``values`` maps names to real numbers; with ``finite``, ValueError unless finite and >= 0."""
    if not isinstance(values, dict):
        raise TypeError(f"{name} must be a JSON object of numbers, got {type(values).__name__} {values!r}")
    for key, value in values.items():
        check_str(f"a key of {name}", key)
        (_check_seconds if finite else check_number)(f"{name}[{key!r}]", value)


def _check_counts(name: str, values) -> None:
    """TypeError or ValueError unless ``values`` maps names to ints >= 0."""
    if not isinstance(values, dict):
        raise TypeError(f"{name} must be a JSON object of counts, got {type(values).__name__} {values!r}")
    for key, value in values.items():
        check_str(f"a key of {name}", key)
        check_int(f"{name}[{key!r}]", value, low=0)


def _check_seconds(name: str, value) -> None:
    """TypeError or ValueError unless ``value`` is a finite number >= 0 (a time, a throughput)."""
    if not math.isfinite(check_number(name, value, low=0)):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")


@dataclass(frozen=True)
class RunId:
    """Which run: the machine it ran on, its recipe (curve), budget (scale-schedule ratio) and seed."""

    machine: str
    recipe: str
    budget: float
    seed: int

    def __post_init__(self):
        check_str("machine", self.machine)
        check_str("recipe", self.recipe)
        if not math.isfinite(check_number("budget", self.budget, low=0, low_open=True)):
            raise ValueError(f"budget must be a finite number > 0, got {self.budget!r}")
        check_int("seed", self.seed, low=0)

    @property
    def key(self) -> tuple[str, str, float, int]:
        return (self.machine, self.recipe, self.budget, self.seed)

    @property
    def label(self) -> str:
        """The run in a few words: "cifar_mild x0.5 seed 1"."""
        return f"{self.recipe} x{self.budget:g} seed {self.seed}"


@dataclass(frozen=True)
class RunRecord(RunId):
    """A finished run: what was trained, where, and what it measured (times in training seconds).

    metric: the name, among ``metrics``, of the value the run is judged by ("top1", "eval_loss");
        ``higher_is_better`` and ``metric_label`` ("validation loss (nats/token)") go with it.
    samples_per_second: training throughput, counted in ``sample_unit`` ("images", "tokens").
    Every field is checked: a metric may be NaN or infinite (the run diverged, see :func:`judge`),
    a time or throughput must be a finite number >= 0.
    """

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
    precision: str = ""  # what its steps computed in ("bf16 autocast", "fp32"); "" in records from before
    eval_seconds: float = 0.0  # its final evaluation's time (TTA's inference cost); 0 in records from before
    # On a CPU, its steps at each count of PyTorch's threads, which changes a run's arithmetic; {} in records from
    # before, and on a GPU.
    steps_by_threads: dict[str, int] = field(default_factory=dict)

    def __post_init__(self):
        super().__post_init__()
        for name in ("metric", "metric_label", "sample_unit", "config_hash", "setup_hash", "precision"):
            check_str(name, getattr(self, name))
        direction(self.higher_is_better)
        _check_values("metrics", self.metrics, finite=False)
        _check_values("phase_seconds", self.phase_seconds, finite=True)
        _check_counts("steps_by_threads", self.steps_by_threads)
        for name in ("train_seconds", "first_epoch_seconds", "samples_per_second", "compile_seconds", "eval_seconds"):
            _check_seconds(name, getattr(self, name))
        check_int("steps", self.steps, low=0)
        if self.metric not in self.metrics:
            raise ValueError(f"run {self.key}: its metric {self.metric!r} is not among its metrics "
                             f"({', '.join(self.metrics) or 'none'}); name one of those as the metric")

    @classmethod
    def made_up(cls, recipe: str = "r", budget: float = 1.0, seed: int = 0, *, quality: float = 0.5,
                seconds: float = 100.0, metric: Metric = TOP1, machine: str = "m", steps: int = 100,
                first_epoch_seconds: float | None = None, samples_per_second: float = 200.0,
                sample_unit: str = "images", metrics: dict[str, float] | None = None,
                phases: dict[str, float] | None = None, config_hash: str = "0123456789ab") -> RunRecord:
        """A run nobody trained, for examples and tests: ``quality`` in ``metric`` (beside any other
        ``metrics``) after ``seconds`` of training; the first epoch a tenth of it unless given.

            >>> RunRecord.made_up("cifar_mild", 0.5, quality=0.7).quality
            0.7
        """
        return cls(machine=machine, recipe=recipe, budget=budget, seed=seed, metric=metric.name,
                   higher_is_better=metric.higher_is_better, metric_label=metric.label,
                   metrics={metric.name: quality, **(metrics or {})}, train_seconds=seconds,
                   first_epoch_seconds=seconds / 10 if first_epoch_seconds is None else first_epoch_seconds,
                   samples_per_second=samples_per_second, sample_unit=sample_unit, steps=steps,
                   config_hash=config_hash, phase_seconds=phases or {})

    @property
    def quality(self) -> float:
        """The value of the run's own metric."""
        return self.metrics[self.metric]

    @property
    def quality_metric(self) -> Metric:
        """The run's metric with its direction and label."""
        return Metric(self.metric, self.higher_is_better, self.metric_label)


@dataclass(frozen=True)
class FailedRun(RunId):
    """A run left out of the curves, speedups and plots, listed with its ``status`` (``diverged`` or
    ``failed``), the ``reason`` in words and ``log``, the path of its stderr log ("" when unknown).

        >>> FailedRun("m", "r", 1.0, 0, "diverged", "eval_loss is nan").label
        'r x1 seed 0'
    """

    status: str
    reason: str
    log: str = ""

    def __post_init__(self):
        super().__post_init__()
        check_choice("status", self.status, LEFT_OUT)
        check_str("reason", self.reason)
        check_str("log", self.log)


Run = RunRecord | FailedRun


def run_problem(record: RunRecord) -> tuple[str, str] | None:
    """(status, reason) when ``record`` cannot go on a curve, else None.

    Diverged: a metric is NaN or infinite. Failed: it trained no step or for no time (a log time axis has no 0).
    Example:
        >>> run_problem(dataclasses.replace(records[0], metrics={"top1": float("nan"), "eval_loss": 1.0}))
        ('diverged', 'its summary gives top1 = nan')
    """
    bad = [f"{name} = {value}" for name, value in record.metrics.items() if not math.isfinite(value)]
    if bad:
        return DIVERGED, f"its summary gives {', '.join(bad)}"
    if record.train_seconds == 0 or record.steps == 0:
        return FAILED, (f"it trained {record.steps} steps in {record.train_seconds:g} s, so it has no place on a "
                        f"time axis; give it a larger budget")
    return None


def judge(run: Run, log: str = "") -> Run:
    """``run`` as the report treats it: a usable record as it is, any other record as a FailedRun with ``log``.

    Example:
        >>> judge(dataclasses.replace(records[0], train_seconds=0.0)).status
        'failed'
    """
    problem = run_problem(run) if isinstance(run, RunRecord) else None
    if problem is None:
        return run
    return FailedRun(run.machine, run.recipe, run.budget, run.seed, *problem, log=log)


def split_runs(runs: Iterable[Run]) -> tuple[list[RunRecord], list[FailedRun]]:
    """(the usable records, the runs left out), each in the order given (see :func:`judge`).

    Example:
        >>> usable, left_out = split_runs([*records, FailedRun("m", "r", 1.0, 0, "failed", "exit code 1")])
        >>> len(usable), [run.status for run in left_out]
        (8, ['failed'])
    """
    judged = [judge(run) for run in runs]
    return ([run for run in judged if isinstance(run, RunRecord)],
            [run for run in judged if isinstance(run, FailedRun)])


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


def _read_json(path: Path):
    """The JSON value in ``path``, read as data only (NaN and Infinity as floats); ValueError when it cannot be."""
    try:
        return json.loads(path.read_text())
    except OSError as error:
        raise ValueError(f"cannot read it: {error.strerror or error}") from None
    except RecursionError:  # json.loads's answer to a value nested past Python's recursion limit
        raise ValueError("it nests its values deeper than Python's recursion limit") from None


def read_run(folder: Path, *, recipe: str, budget: float, seed: int) -> RunRecord:
    """The record of the finished run in ``folder`` (its summary.json, config.json and machine label).

    Reads summaries of both formats: the one naming its metric and the older top-1-only one.
    A summary that is not JSON, not an object, or lacks or mistypes a field is a ValueError naming it.
    """
    summary_path = folder / "summary.json"
    if not summary_path.is_file():
        raise FileNotFoundError(f"run folder {folder}: no summary.json; the run has not finished")
    config = load_config(folder / "config.json")
    try:
        summary = upgrade_legacy(_read_json(summary_path))
        missing = [key for key in SUMMARY_KEYS if key not in summary]
        if missing:
            raise ValueError(f"it lacks {', '.join(missing)} and holds {', '.join(summary) or 'nothing'}")
        return RunRecord(machine=read_machine(folder), recipe=recipe, budget=budget, seed=seed,
                         metric=summary["metric"], higher_is_better=summary["higher_is_better"],
                         metric_label=summary["metric_label"], metrics=summary["metrics"],
                         train_seconds=summary["train_seconds"], first_epoch_seconds=summary["first_epoch_seconds"],
                         samples_per_second=summary["samples_per_second"], sample_unit=summary["sample_unit"],
                         steps=summary["steps"], config_hash=config_hash(config),
                         phase_seconds=summary.get("phase_seconds", {}), setup_hash=setup_hash(config),
                         compile_seconds=summary.get("compile_seconds", 0.0),
                         precision=summary.get("precision", ""), eval_seconds=summary.get("eval_seconds", 0.0),
                         steps_by_threads=summary.get("steps_by_threads", {}))
    except (TypeError, ValueError, OverflowError) as error:  # OverflowError: an int past a float's range (10**400)
        raise ValueError(f"{summary_path} is not a run summary ({error}); delete the folder {folder} "
                         f"to train the run again") from None


def _row(run: Run) -> dict:
    """A run as one row of results.json, with its status."""
    run = judge(run)
    row = dataclasses.asdict(run)
    return row if isinstance(run, FailedRun) else {**row, "status": FINISHED}


def write_results(runs: Sequence[Run], out: Path) -> None:
    """Write ``results.json`` and ``results.csv`` of ``runs`` (finished or left out: see :func:`judge`) to ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    rows = [_row(run) for run in runs]
    (out / RESULTS_JSON).write_text(json.dumps(rows, indent=2) + "\n")
    flattened = {"metrics": "metrics", "phase_seconds": "phase", "steps_by_threads": "threads"}  # field -> prefix
    ids = [f.name for f in dataclasses.fields(RunId)]
    measured = [f.name for f in dataclasses.fields(RunRecord) if f.name not in ids and f.name not in flattened]
    columns = [*ids, "status", *measured, "reason", "log"]
    nested = [(name, prefix, sorted({key for row in rows for key in row.get(name, {})}))
              for name, prefix in flattened.items()]
    with open(out / RESULTS_CSV, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(columns + [f"{prefix}.{key}" for _, prefix, keys in nested for key in keys])
        for row in rows:
            writer.writerow([row.get(name, "") for name in columns] +
                            [row.get(name, {}).get(key, "") for name, _, keys in nested for key in keys])


def _run_from_row(row) -> Run:
    if not isinstance(row, dict):
        raise TypeError(f"each row must be a JSON object, got {type(row).__name__} {row!r}")
    fields = dict(row)
    status = fields.pop("status", FINISHED)  # rows written before runs had one all finished
    if status == FINISHED:
        return judge(RunRecord(**upgrade_legacy(fields)))
    return FailedRun(**fields, status=status)


def read_results(folder: Path) -> list[Run]:
    """The runs in ``folder/results.json`` (a sweep's, an ablation's or a merge's output folder), each checked.

    A file that is not JSON, not a list, or holds a row that is not a run is a ValueError naming it.
    """
    path = folder / RESULTS_JSON
    if not path.is_file():
        raise FileNotFoundError(f"{folder}: no {RESULTS_JSON}; pass folders written by "
                                f"python -m fastcore_ops.training.tradeoff --out or python -m fastcore_ops.training.ablate --out")
    try:
        rows = _read_json(path)
        if not isinstance(rows, list):
            raise TypeError(f"it holds a JSON {type(rows).__name__}")
        return [_run_from_row(row) for row in rows]
    except (ValueError, TypeError, OverflowError) as error:  # bad JSON, missing or unknown fields, a record that
        # contradicts itself, an int past a float's range (a 400-digit budget)
        raise ValueError(f"{path} is not a list of run records ({error}); pass folders written by "
                         f"python -m fastcore_ops.training.tradeoff or python -m fastcore_ops.training.ablate") from None


def judged_by(runs: Sequence[Run], recipe: str, metric: str) -> list[Run]:
    """``runs`` and, for each finished run of ``recipe``, a copy on a curve of its own, "``recipe`` by ``metric``",
    whose quality is that other metric of the run (``top1_tta``: top-1 with test-time augmentation).

    ValueError when no run is of ``recipe``, or one of its finished runs lacks ``metric``.

    Example:
        >>> mild = RunRecord.made_up("mild", quality=0.80, metrics={"top1_tta": 0.81})
        >>> [(run.recipe, run.quality) for run in judged_by([mild], "mild", "top1_tta")]
        [('mild', 0.8), ('mild by top1_tta', 0.81)]
    """
    if not any(run.recipe == recipe for run in runs):
        recipes = ", ".join(sorted({run.recipe for run in runs}))
        raise ValueError(f"--judge {recipe}={metric}: no run of {recipe!r} among the runs ({recipes})")
    copies = []
    for run in runs:
        if run.recipe != recipe or not isinstance(run, RunRecord):
            continue
        if metric not in run.metrics:
            raise ValueError(f"--judge {recipe}={metric}: run {run.label} reports no {metric!r} (it has "
                             f"{', '.join(run.metrics)}); judge by a metric its runs all report")
        copies.append(dataclasses.replace(run, recipe=f"{recipe} by {metric}",
                                          metrics={**run.metrics, run.metric: run.metrics[metric]}))
    return [*runs, *copies]


def merge_records(groups: Iterable[Sequence[Run]]) -> list[Run]:
    """All runs, each (machine, recipe, budget, seed) once.

    The same run found twice (the same configuration hash, or left out twice, e.g. a folder merged
    twice) is kept once with a warning; a finished run replaces the same run left out elsewhere;
    two different configurations under one key cannot share a curve and raise.

    Example:
        >>> merge_records([[]])
        []
    """
    merged: dict[tuple, Run] = {}
    for runs in groups:
        for run in runs:
            kept = merged.get(run.key)
            if kept is None or (isinstance(kept, FailedRun) and isinstance(run, RunRecord)):
                merged[run.key] = run
            elif isinstance(run, RunRecord) and kept.config_hash != run.config_hash:
                raise ValueError(f"run {run.key} appears with two configurations ({kept.config_hash} and "
                                 f"{run.config_hash}); merge only folders that ran the same recipes")
            else:
                warnings.warn(f"run {run.key} appears more than once; keeping the first", stacklevel=2)
    return list(merged.values())
