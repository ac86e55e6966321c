"""Each priced run's plan of steps, and the windows of steps that time every kind of them.

One trainer is built per configuration less seed (:func:`plan_records`); its steps are counted by kind
(:mod:`fastcore_ops.training.tradeoff.step_kinds`), checked against what the run trained, and the kinds not yet
covered get a window each (:func:`fastcore_ops.training.tradeoff.cost_pass.choose_windows`), which
:func:`time_records` times here unless an earlier pass's step times are given.

    >>> plans, costs = time_records(records, configs, build, costs=None, rounds=3, threads=4,
    ...                             progress=False)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from fastcore_ops.data.backends.pil import default_num_workers
from fastcore_ops.training.config import TrainConfig, setup_hash
from fastcore_ops.training.tradeoff.cost_pass import Window, choose_windows, measure
from fastcore_ops.training.tradeoff.results import RunRecord
from fastcore_ops.training.tradeoff.step_costs import StepCosts
from fastcore_ops.training.tradeoff.step_kinds import RunPlan, kind_function, plan_run


def timed_workers(costs: StepCosts | None, setup: str) -> int | None:
    """The decoding workers an earlier pass timed ``setup`` with; None without one (plan with the trainer's own).
    A pass from before they were recorded decoded with one worker per core, the default then."""
    timed_with = costs.setups.get(setup) if costs is not None else None
    if timed_with is None:
        return None
    return default_num_workers() if timed_with.decoding_workers is None else timed_with.decoding_workers


def plan_records(records: Sequence[RunRecord], configs: dict[tuple, TrainConfig],
                 build: Callable[[TrainConfig], object],
                 costs: StepCosts | None = None) -> tuple[dict[tuple, RunPlan], list[Window]]:
    """Each run's plan (one trainer built per configuration less seed) and the windows that time every kind.

    With ``costs`` (step times of an earlier pass), a setup is planned with the decoding workers that pass timed
    it with (:func:`timed_workers`): a run's share of images decoded afresh depends on them, and here they may
    differ (another machine's cores, other threads).

    ValueError for a run whose plan has another number of steps than it trained (other data, another --subset).
    """
    plans, by_config, windows, covered = {}, {}, [], {}
    for record in records:
        config = configs[record.key]
        setup = setup_hash(config)
        shared = (setup, record.budget)
        if shared in by_config:
            _check_steps(record, by_config[shared].total_steps)
        else:
            trainer = build(config)
            try:
                _check_steps(record, trainer.state.total_steps)  # before its steps are walked
                workers = timed_workers(costs, setup)
                by_config[shared] = plan_run(trainer, setup, workers)
                windows += choose_windows(kind_function(trainer, setup), by_config[shared], config, setup,
                                          record.recipe, covered)
            finally:
                trainer.train_loader.close()
                trainer.task.close()
        plans[record.key] = by_config[shared]
    return plans, windows


def _check_steps(record: RunRecord, total_steps: int) -> None:
    if total_steps != record.steps:
        raise ValueError(f"run {record.label} trained {record.steps} steps, but on this data it would train "
                         f"{total_steps}; pass the --data (and --subset) it trained on")


def time_records(records: Sequence[RunRecord], configs: dict[tuple, TrainConfig],
                 build: Callable[[TrainConfig], object], *, costs: StepCosts | None, rounds: int, threads: int,
                 progress: bool) -> tuple[dict[tuple, RunPlan], StepCosts | None]:
    """Plan every run (``configs``: each one's, by key: :func:`record_config`) and, without ``costs`` (an earlier
    pass's step times), time every kind of their steps here (see :func:`measure`)."""
    plans, windows = plan_records(records, configs, build, costs)
    if costs is not None:
        return plans, None
    return plans, measure(windows, build, rounds=rounds, threads=threads, progress=progress)
