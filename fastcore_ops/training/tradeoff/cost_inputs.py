"""The cost pass's inputs: the runs, each with the configuration it trained, and an earlier pass's step times, checked
before any step is timed.

The runs come from tradeoff or ablation output folders (their ``results.json``), trained on any
machine. Each run's configuration is its folder's ``runs/<run>/config.json`` where the folder still
holds it, else its recipe rebuilt at its budget and seed; either way it must hash to the
configuration the run recorded.

    >>> inputs = read_cost_inputs([out], times=None, baseline=None, data=None, subset=None)  # doctest: +SKIP
    >>> inputs.baseline  # doctest: +SKIP
    'cifar_baseline'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fastcore_ops.training.config import TrainConfig
from fastcore_ops.training.recipes import list_recipes
from fastcore_ops.training.tasks.registry import task_named
from fastcore_ops.training.tradeoff.options import choose_baseline
from fastcore_ops.training.tradeoff.planning import RUNS, PlannedRun, name_problem, run_config
from fastcore_ops.training.tradeoff.results import RESULTS_JSON, Run, RunRecord, merge_records, read_results
from fastcore_ops.training.tradeoff.run_table import RunTable
from fastcore_ops.training.tradeoff.costs_file import read_costs
from fastcore_ops.training.tradeoff.step_costs import StepCosts
from fastcore_ops.training.tradeoff.step_kinds import MAX_PLANNED_STEPS
from fastcore_ops.training.tradeoff.trained_config import record_config


def read_priced_runs(folder: Path) -> list[Run]:
    """The runs of ``folder``'s results.json (:func:`read_results`), with what the cost pass takes from them checked:
    each run's recipe names its folder under ``runs/``
    (:func:`~fastcore_ops.training.tradeoff.trained_config.record_config`), so it must be a plain name
    (:func:`fastcore_ops.training.tradeoff.planning.name_problem`), and each finished run's steps are walked one by one
    (:func:`plan_run`), so they are at most :data:`MAX_PLANNED_STEPS`. ValueError naming the file and the run.
    """
    runs, path = read_results(folder), folder / RESULTS_JSON
    for number, run in enumerate(runs):
        problem = name_problem(run.recipe)
        if problem is not None:
            raise ValueError(f"{path}: row {number}: the recipe {run.recipe!r} {problem}; it names the run's folder "
                             f"under {RUNS}/, which is never looked for outside {folder}: pass folders written by "
                             f"python -m fastcore_ops.training.tradeoff or python -m fastcore_ops.training.ablate")
        if isinstance(run, RunRecord) and run.steps > MAX_PLANNED_STEPS:
            raise ValueError(f"{path}: run {run.label} gives {run.steps} steps, more than the {MAX_PLANNED_STEPS} a "
                             f"cost plan walks; pass folders written by python -m fastcore_ops.training.tradeoff or "
                             f"python -m fastcore_ops.training.ablate")
    return runs


@dataclass(frozen=True)
class CostInputs:
    """What a cost pass prices: the runs as a table, each usable run's configuration by its key, the step times of an
    earlier pass (None: time them here) and the baseline of the reports."""

    table: RunTable
    configs: dict[tuple, TrainConfig]
    costs: StepCosts | None
    baseline: str


def read_cost_inputs(folders: Sequence[Path], *, times: Path | None, baseline: str | None, data: Path | None,
                     subset: int | None, assignments: Sequence[str] = ()) -> CostInputs:
    """The runs of ``folders``, each once, with each usable run's configuration
    (:func:`~fastcore_ops.training.tradeoff.trained_config.record_config`), and the step
    times in ``times``; ValueError when no run is usable, the usable ones do not share a metric, a ``--set`` of
    ``assignments`` applies to no run, ``times`` or ``baseline`` cannot be used, or a run's task cannot take ``data``
    and ``subset`` (the ``--data`` and ``--subset`` the runs trained with).
    """
    table = RunTable.of(merge_records(read_priced_runs(folder) for folder in folders))
    if not table.records:
        raise ValueError(f"--cost {' '.join(map(str, folders))}: the folders hold no finished run to price")
    for recipe in dict.fromkeys(record.recipe for record in table.records if record.recipe in list_recipes()):
        run_config(PlannedRun(recipe, 1.0, 0, 0.0), assignments)  # a --set that applies to no run is refused now
    costs = read_costs(times) if times is not None else None
    baseline = choose_baseline(baseline, list(dict.fromkeys(run.recipe for run in table.runs)))
    configs = {record.key: record_config(record, folders, assignments) for record in table.records}
    for task in dict.fromkeys(task_named(config.task) for config in configs.values()):
        task.check_inputs(data, subset)  # as the runs' task takes them
    return CostInputs(table, configs, costs, baseline)
