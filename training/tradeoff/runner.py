"""The sweep runner of ``python -m training.tradeoff`` and ``python -m training.ablate``: check, train, report.

A command parses its arguments into a :class:`SweepRequest` and calls :func:`sweep`, which checks
everything the request asks for before any training or any write (the recipes' configurations,
their metric, the data, ``--out``), then trains the unfinished runs under ``OUT/runs``, reports
them and returns the exit code: 0 done, 1 a run failed (the same command retries it), 2 bad input,
128+signal when stopped (the same command resumes).

    >>> data = Path("../shared/datasets/cifar10-jpeg")
    >>> request = SweepRequest(["cifar_baseline", "cifar_mild"], parse_budgets("0.5,1"), 3, data, None, "cpu",
    ...                        [], out, "cifar_baseline", first_seed=2)
    >>> sweep(request)  # doctest: +SKIP
    0
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from fastcore_ops.cli import check_device, refuse
from fastcore_ops.owned_folder import check_claimable, claim_folder
from training.config import TrainConfig
from training.tasks.registry import task_named
from training.tradeoff.metric import one_metric
from training.tradeoff.report import build_report
from training.tradeoff.results import FAILED, FailedRun, Run, RunRecord, common_metric, machine_label
from training.tradeoff.sweep import (RUNS, PlannedRun, SweepInterrupted, TrainOptions, Variant, check_finished_runs,
                                     expected_metric, plan_sweep, read_outcome, run_config, run_sweep)
from training.tradeoff.tables import left_out_note


def parse_budgets(text: str) -> list[float]:
    """The scale-schedule ratios in a comma-separated list: finite numbers > 0, each given once.

    Example:
        >>> parse_budgets("0.25,1,2")
        [0.25, 1.0, 2.0]
    """
    budgets = []
    for item in text.split(","):
        try:
            budget = float(item)
        except ValueError:
            budget = math.nan
        if not (math.isfinite(budget) and budget > 0):
            raise ValueError(f"--budgets: {item.strip()!r} is not a budget; accepted: comma-separated "
                             f"scale-schedule ratios > 0, e.g. 0.25,0.5,1,2")
        budgets.append(budget)
    if len(set(budgets)) != len(budgets):
        raise ValueError(f"--budgets {text!r}: a budget is given twice; give each once")
    return budgets


def check_sweep_options(seeds: int, subset: int | None, assignments: list[str]) -> None:
    """Refuse seed and subset counts below 1, and --set values for what the sweep sets itself (seed, budget).

    Example:
        >>> check_sweep_options(2, None, ["seed=3"])
        Traceback (most recent call last):
        ...
        ValueError: --set seed=3: the sweep sets each run's seed and budget; use --seeds and --budgets instead
    """
    if seeds < 1:
        raise ValueError(f"--seeds must be >= 1 (seeds per curve and budget), got {seeds}")
    if subset is not None and subset < 1:
        raise ValueError(f"--subset must be >= 1 (images per class), got {subset}")
    for assignment in assignments:
        if assignment.partition("=")[0].strip() in ("seed", "schedule.scale_schedule_ratio"):
            raise ValueError(f"--set {assignment}: the sweep sets each run's seed and budget; "
                             f"use --seeds and --budgets instead")


def check_out(out: Path, tool: str, plan: list[PlannedRun], assignments: list[str]) -> None:
    """Refuse an --out that ``tool`` may not write into (neither new, empty nor marked as its own: see
    :mod:`fastcore_ops.owned_folder`) or whose finished runs had another configuration. Writes nothing.

    Example:
        >>> check_out(out / "new", "tradeoff", [], [])
    """
    try:
        check_claimable(out, tool)
    except ValueError as error:
        raise ValueError(f"--out {error}") from None
    check_finished_runs(plan, out / RUNS, assignments)


def claim_out(out: Path, tool: str) -> None:
    """Create ``out`` if needed and mark it as ``tool``'s (see :func:`check_out`); ValueError when that cannot be done.

    Example:
        >>> claim_out(out / "mine", "tradeoff")
        >>> sorted(path.name for path in (out / "mine").iterdir())
        ['.fastcore_ops-tradeoff']
    """
    try:
        claim_folder(out, tool)
    except ValueError as error:
        raise ValueError(f"--out {error}") from None
    except OSError as error:
        raise ValueError(f"--out {out} cannot be created or marked ({error.strerror or error}); "
                         f"pass a folder you can write to") from None


def progress_quality(record: RunRecord) -> str:
    """A finished run's quality for its progress line: "top-1 61.25%", "validation loss 1.234 nats/token".

    Example:
        >>> progress_quality(records[0])
        'top-1 50.00%'
    """
    metric = record.quality_metric
    return f"{metric.quantity} {metric.format(record.quality, precise=True)}"


def check_one_metric(configs: dict[str, TrainConfig]) -> None:
    """Refuse recipes whose tasks report different metrics: one report compares one metric.

    Example:
        >>> from training.recipes import get_recipe
        >>> check_one_metric({name: get_recipe(name) for name in ("cifar_baseline", "gpt_baseline")})
        Traceback (most recent call last):
        ...
        ValueError: the runs do not share one metric, ...: cifar_baseline measure top1 (top-1 (%), higher is better); gpt_baseline measure eval_loss (...). Sweep or merge ...
    """
    one_metric([(recipe, expected_metric(config)) for recipe, config in configs.items()])


def check_sweep_data(configs: dict[str, TrainConfig], data: Path | None, subset: int | None) -> None:
    """Refuse, before any training, data the recipes' tasks cannot use (each task's ``check_inputs``).

    Example:
        >>> from training.recipes import get_recipe
        >>> check_sweep_data({"gpt_baseline": get_recipe("gpt_baseline")}, None, None)   # its own text
    """
    for name, config in configs.items():
        try:
            task_named(config.task).check_inputs(data, subset)
        except ValueError as error:
            raise ValueError(f"recipe {name}: {error}") from None


@dataclass(frozen=True)
class SweepRequest:
    """What a sweep command asks for; :func:`sweep` checks and runs it (the tradeoff and ablation commands).

    variants: the curves, recipe names or :class:`Variant` (a recipe with ``--set`` values of its
    own). assignments: ``--set`` values for every run. report: writes the report from the runs,
    the output folder and the baseline's name (default: the tradeoff report). imports: the modules
    (``--import``) the command imported, which every run imports too.
    """

    variants: list[str | Variant]
    budgets: list[float]
    seeds: int
    data: Path | None
    subset: int | None
    device: str
    assignments: list[str]
    out: Path
    baseline: str
    first_seed: int = 0
    tool: str = "tradeoff"
    progress: bool = True
    report: Callable[[list[Run], Path, str], list[Path]] | None = None
    imports: tuple[str, ...] = ()


def _variant_configs(request: SweepRequest) -> dict[str, TrainConfig]:
    """Each curve's configuration, built now so that a bad ``--set`` fails before any training."""
    configs = {}
    for item in request.variants:
        if isinstance(item, str):
            configs[item] = run_config(PlannedRun(item, 1.0, 0, 1.0), request.assignments)
            continue
        try:
            configs[item.name] = run_config(PlannedRun(item.name, 1.0, 0, 1.0, item), request.assignments)
        except (TypeError, ValueError) as error:
            raise ValueError(f"variant {item.name}: {error}") from None
    return configs


def sweep(request: SweepRequest) -> int:
    """Check everything ``request`` asks for before any training or write, then train, report and return the
    exit code (see :func:`execute_sweep`)."""
    try:
        check_sweep_options(request.seeds, request.subset, request.assignments)
        if request.first_seed < 0:
            raise ValueError(f"--first-seed must be >= 0, got {request.first_seed}")
        configs = _variant_configs(request)
        check_one_metric(configs)
        check_sweep_data(configs, request.data, request.subset)
        device = str(check_device(request.device))
        epochs = {name: config.schedule.epochs for name, config in configs.items()}
        plan = plan_sweep(request.variants, request.budgets, request.seeds, epochs, first_seed=request.first_seed)
        check_out(request.out, request.tool, plan, request.assignments)
    except (ValueError, TypeError, OSError) as error:
        return refuse(error)
    data = None if request.data is None else request.data.resolve()
    options = TrainOptions(data=data, device=device, machine=machine_label(device),
                           subset=request.subset, assignments=tuple(request.assignments), imports=request.imports)
    return execute_sweep(plan, request.out, options, request.baseline, tool=request.tool, progress=request.progress,
                         report=request.report)


def execute_sweep(plan: list[PlannedRun], out: Path, options: TrainOptions, baseline: str, *, tool: str = "tradeoff",
                  progress: bool = True, report: Callable[[list[Run], Path, str], list[Path]] | None = None) -> int:
    """Mark ``out`` as ``tool``'s (checked before by :func:`check_out`), train ``plan``'s unfinished runs under
    ``out/runs``, then ``report`` them (default: the tradeoff report, :func:`build_report`); returns the exit code.

    Each finished run is checked to share the others' metric and printed with its quality and
    time; a run that failed or diverged is printed with why and its log, and the sweep goes on.
    The report lists every run; the exit code says whether one failed (:func:`sweep_exit_code`).
    Stopped by a signal, it reports the runs finished so far and returns 128 + the signal.
    Also the ablation tool's runner (``python -m training.ablate``), with its own ``report``.
    """
    report = report or build_report
    runs: list[Run] = []

    def finished(run: PlannedRun, folder: Path, exit_code: int | None) -> None:
        outcome = read_outcome(run, folder, exit_code)
        if isinstance(outcome, RunRecord):
            # The run's own summary is the authority (a run folder from before may hold another task's): stop at
            # the first run that cannot share the report.
            common_metric([*(kept for kept in runs if isinstance(kept, RunRecord)), outcome])
            line = f"{progress_quality(outcome)} | train {outcome.train_seconds:.1f} s"
        else:
            line = f"{outcome.status}: {left_out_note(outcome)}"
        runs.append(outcome)
        tqdm.write(f"{outcome.label}: {line}{' (finished before)' if exit_code is None else ''}")

    try:
        claim_out(out, tool)
    except ValueError as error:
        return refuse(error)
    try:
        run_sweep(plan, out.resolve(), options, tool=tool, progress=progress, on_finished=finished)
    except ValueError as error:  # a finished run measures another metric
        return refuse(f"{error}; the finished runs are kept under {out / RUNS}")
    except SweepInterrupted as stop:
        print(stop, file=sys.stderr)
        if runs:  # a sweep run in pieces shows what it has so far
            written = report(runs, out, baseline)
            print(f"partial report of the {len(runs)} runs finished so far: {written[-1]}", file=sys.stderr)
        return 128 + stop.signal_number
    written = report(runs, out, baseline)
    print(f"report: {written[-1]} ({len(runs)} runs; tables and figures next to it)")
    return sweep_exit_code(runs)


def sweep_exit_code(runs: list[Run]) -> int:
    """1 when a run of the sweep failed, else 0; the runs left out are named, with their logs, in one line on stderr.

    A diverged run is a result (that recipe does not train at that budget): alone it does not fail the sweep.
    Example:
        >>> sweep_exit_code([FailedRun("m", "r", 1.0, 0, "diverged", "eval_loss = nan", "runs/r-x1-s0/err.log")])
        0
    """
    left_out = [run for run in runs if isinstance(run, FailedRun)]
    if not left_out:
        return 0
    failed = sum(run.status == FAILED for run in left_out)
    names = ", ".join(f"{run.label} ({run.status}; log: {run.log or 'none'})" for run in left_out)
    if not failed:
        print(f"note: {len(left_out)} of {len(runs)} runs diverged and are left out of the curves: {names}",
              file=sys.stderr)
        return 0
    diverged = len(left_out) - failed
    print(f"error: {failed} of {len(runs)} runs failed{f' and {diverged} diverged' if diverged else ''}, left out of "
          f"the report: {names}; rerun the same command to retry the failed runs", file=sys.stderr)
    return 1
