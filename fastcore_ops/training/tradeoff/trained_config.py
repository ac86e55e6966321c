"""The configuration a finished run trained (:func:`record_config`), as the cost pass rebuilds it to plan the run's steps.

It is the run's own ``runs/<run>/config.json`` where a folder still holds it, else its recipe rebuilt at its budget and
seed, as it is or with the ``--set`` overrides given; either way it must hash to the configuration the run recorded.

    >>> config = record_config(record, [Path("reports/laptop")])  # doctest: +SKIP
    >>> config_hash(config) == record.config_hash  # doctest: +SKIP
    True
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from fastcore_ops.training.config import TrainConfig, config_hash, load_config
from fastcore_ops.training.recipes import list_recipes
from fastcore_ops.training.run_folder import CONFIG_NAME
from fastcore_ops.training.tradeoff.planning import RUNS, PlannedRun, name_problem, run_config
from fastcore_ops.training.tradeoff.results import RunRecord


def record_config(record: RunRecord, folders: Sequence[Path], assignments: Sequence[str] = ()) -> TrainConfig:
    """The configuration ``record`` trained: from a folder's ``runs/`` when one holds it, else its recipe rebuilt,
    as it is or with ``assignments`` (the ``--set`` overrides the run trained with).

    ValueError when none hashes to the record's ``config_hash`` (the recipe changed since, or the
    run was a variant whose folder is gone and whose overrides were not given), when the record's recipe is no
    plain name (it names the run's folder:
    :func:`fastcore_ops.training.tradeoff.cost_inputs.read_priced_runs`), and when the one that does hash plans more
    epochs than the run trained steps (naming the file it came from).
    """
    problem = name_problem(record.recipe)
    if problem is not None:
        raise ValueError(f"run {record.label}: the recipe {record.recipe!r} {problem}; it names the run's folder")
    name = PlannedRun(record.recipe, record.budget, record.seed, 0.0).folder_name
    trained = next(((config, source) for config, source in _candidates(record, name, folders, assignments)
                    if config_hash(config) == record.config_hash), None)
    if trained is None:
        sets = "".join(f" --set {assignment}" for assignment in assignments)
        raise ValueError(f"run {record.label}: no configuration hashing to its {record.config_hash} was found (neither "
                         f"runs/{name}/{CONFIG_NAME} in {', '.join(map(str, folders))} nor its recipe as it is now"
                         f"{', as it is or with' + sets if sets else ''}); cost it from the folder that holds its runs, "
                         f"at the commit that trained it, or pass the --set overrides it trained with")
    config, source = trained
    # An epoch is one step at least: a configuration planning more epochs than the run trained steps is not the
    # one it trained (an epoch count from elsewhere, 1e300, would make a plan with no end).
    schedule = config.schedule
    epochs = schedule.epochs * schedule.scale_schedule_ratio
    if not epochs < record.steps + 1:
        raise ValueError(f"{source} plans {epochs:g} epochs (schedule.epochs {schedule.epochs:g} x "
                         f"scale_schedule_ratio {schedule.scale_schedule_ratio:g}), but run {record.label} trained "
                         f"{record.steps} steps, and an epoch is one step at least: it is not the configuration the "
                         f"run trained; restore the run's folder as training wrote it")
    return config


def _candidates(record: RunRecord, name: str, folders: Sequence[Path],
                assignments: Sequence[str]) -> Iterator[tuple[TrainConfig, str]]:
    """The configurations ``record`` may have trained, each with where it came from, one at a time: its folder's
    ``runs/<name>/config.json`` in each of ``folders``, then its recipe rebuilt as it is and with ``assignments``."""
    for folder in folders:
        path = folder / RUNS / name / CONFIG_NAME
        if path.is_file():
            yield load_config(path), f"the configuration {path}"
    if record.recipe in list_recipes():
        for overrides in dict.fromkeys([(), tuple(assignments)]):
            yield (run_config(PlannedRun(record.recipe, record.budget, record.seed, 0.0), overrides),
                   f"run {record.label}'s recipe at its budget")
