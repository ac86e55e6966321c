"""``python -m fastcore_ops.training.tradeoff --cost FOLDER...``: price a sweep's runs on this machine; report on modelled times.

The runs come from tradeoff or ablation output folders (their ``results.json``), trained on any
machine. Each run's configuration is its folder's ``runs/<run>/config.json`` where the folder still
holds it, else its recipe rebuilt at its budget and seed; either way it must hash to the
configuration the run recorded. Every run's plan is checked against its record (the same number
of steps: the same data and ``--subset``), the kinds are timed (:mod:`fastcore_ops.training.tradeoff.cost_pass`),
or read from an earlier pass's ``costs.json`` (``--times``), and written:

- ``OUT/costs.json`` and ``OUT/costs.md``: every kind's and setup's costs, and where they were measured;
- ``OUT/modelled-vs-measured.md``: every run's measured and modelled time side by side, with the model's error;
- ``OUT/`` the tradeoff report on modelled times (every run on the cost pass's machine);
- ``OUT/measured/`` the same report on the times the runs measured, machine by machine.

    >>> write_cost_report(records, [], model_runs(records, plans, costs), costs, Path("out"),
    ...                   "cifar_baseline", timed_here=True)  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import functools
import math
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from fastcore_ops.data.backends.pil import default_num_workers
from fastcore_ops.host_memory import keep_freed_memory
from fastcore_ops.kernels import backend
from fastcore_ops.owned_folder import check_claimable
from fastcore_ops.training.assemble import build_trainer
from fastcore_ops.training.compute_threads import use_threads
from fastcore_ops.training.config import TrainConfig, config_hash, load_config, setup_hash
from fastcore_ops.training.recipes import list_recipes
from fastcore_ops.training.run_folder import CONFIG_NAME
from fastcore_ops.training.tasks.registry import task_named
from fastcore_ops.training.tradeoff.cost_pass import (COSTS_JSON, ModelledTime, StepCosts, Window, choose_windows,
                                                      measure, read_costs, write_costs)
from fastcore_ops.training.tradeoff.options import choose_baseline
from fastcore_ops.training.tradeoff.planning import RUNS, PlannedRun, claim_out, name_problem, run_config
from fastcore_ops.training.tradeoff.report import build_report
from fastcore_ops.training.tradeoff.results import (RESULTS_JSON, Run, RunRecord, common_metric, merge_records,
                                                    read_results, split_runs)
from fastcore_ops.training.tradeoff.step_kinds import MAX_PLANNED_STEPS, RunPlan, kind_function, plan_run
from fastcore_ops.training.tradeoff.tables import markdown_table

MEASURED = "measured"  # OUT's subfolder for the report on measured times
COSTS_MD = "costs.md"
CHECK_MD = "modelled-vs-measured.md"


def read_priced_runs(folder: Path) -> list[Run]:
    """The runs of ``folder``'s results.json (:func:`read_results`), with what the cost pass takes from them checked:
    each run's recipe names its folder under ``runs/`` (:func:`record_config`), so it must be a plain name
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


def _check_length(config: TrainConfig, record: RunRecord, source: str) -> TrainConfig:
    """``config`` if it can be what ``record`` trained, by its length: its epochs (scale schedule applied) fewer than
    one more than the run's steps, as an epoch is a step at least; ValueError naming ``source`` otherwise (an epoch
    count from elsewhere, 1e300, would make a plan with no end)."""
    schedule = config.schedule
    epochs = schedule.epochs * schedule.scale_schedule_ratio
    if not epochs < record.steps + 1:
        raise ValueError(f"{source} plans {epochs:g} epochs (schedule.epochs {schedule.epochs:g} x "
                         f"scale_schedule_ratio {schedule.scale_schedule_ratio:g}), but run {record.label} trained "
                         f"{record.steps} steps, and an epoch is one step at least: it is not the configuration the "
                         f"run trained; restore the run's folder as training wrote it")
    return config


def record_config(record: RunRecord, folders: Sequence[Path], assignments: Sequence[str] = ()) -> TrainConfig:
    """The configuration ``record`` trained: from a folder's ``runs/`` when one holds it, else its recipe rebuilt,
    as it is or with ``assignments`` (the ``--set`` overrides the run trained with).

    ValueError when none hashes to the record's ``config_hash`` (the recipe changed since, or the
    run was a variant whose folder is gone and whose overrides were not given), when the record's recipe is no
    plain name (it names the run's folder: :func:`read_priced_runs`), and when the one that does hash plans more
    epochs than the run trained steps (naming the file it came from).
    """
    problem = name_problem(record.recipe)
    if problem is not None:
        raise ValueError(f"run {record.label}: the recipe {record.recipe!r} {problem}; it names the run's folder")
    name = PlannedRun(record.recipe, record.budget, record.seed, 0.0).folder_name
    for folder in folders:
        path = folder / RUNS / name / CONFIG_NAME
        if path.is_file():
            config = load_config(path)
            if config_hash(config) == record.config_hash:
                return _check_length(config, record, f"the configuration {path}")
    if record.recipe in list_recipes():
        for overrides in dict.fromkeys([(), tuple(assignments)]):
            config = run_config(PlannedRun(record.recipe, record.budget, record.seed, 0.0), overrides)
            if config_hash(config) == record.config_hash:
                return _check_length(config, record, f"run {record.label}'s recipe at its budget")
    sets = "".join(f" --set {assignment}" for assignment in assignments)
    raise ValueError(f"run {record.label}: no configuration hashing to its {record.config_hash} was found (neither "
                     f"runs/{name}/{CONFIG_NAME} in {', '.join(map(str, folders))} nor its recipe as it is now"
                     f"{', as it is or with' + sets if sets else ''}); cost it from the folder that holds its runs, "
                     f"at the commit that trained it, or pass the --set overrides it trained with")


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
        if shared not in by_config:
            trainer = build(config)
            try:
                _check_steps(record, trainer.state.total_steps)  # before its steps are walked
                plan = plan_run(trainer, setup, timed_workers(costs, setup))
                windows += choose_windows(kind_function(trainer, setup), plan, config, setup, covered)
            finally:
                trainer.train_loader.close()
                trainer.task.close()
            by_config[shared] = plan
        plan = by_config[shared]
        _check_steps(record, plan.total_steps)
        plans[record.key] = plan
    return plans, windows


def _check_steps(record: RunRecord, total_steps: int) -> None:
    if total_steps != record.steps:
        raise ValueError(f"run {record.label} trained {record.steps} steps, but on this data it would train "
                         f"{total_steps}; pass the --data (and --subset) it trained on")


def modelled_record(record: RunRecord, modelled: ModelledTime, machine: str) -> RunRecord:
    """``record`` as if trained on the cost pass's ``machine``: its modelled time, its phases unknown."""
    one_off = modelled.setup_seconds + modelled.starts_seconds
    return dataclasses.replace(record, machine=f"{machine} (modelled)", train_seconds=modelled.seconds,
                               first_epoch_seconds=max(0.0, one_off), phase_seconds={},
                               samples_per_second=record.samples_per_second * record.train_seconds / modelled.seconds)


def _kind_rows(costs: StepCosts) -> tuple[list[str], list[list[str]]]:
    header = ["recipe", "precision", "kind", "ms/step, images decoded", "ms/step, images kept", "steps timed"]
    rows = [[costs.setups[kind.setup].recipe, costs.setups[kind.setup].precision, kind.describe(),
             f"{1000 * cost.decoded_seconds:.1f}", f"{1000 * cost.kept_seconds:.1f}", str(cost.samples)]
            for kind, cost in sorted(costs.kinds.items())]
    return header, rows


def _setup_rows(costs: StepCosts) -> tuple[list[str], list[list[str]]]:
    header = ["recipe", "setup", "precision", "decoding workers", "before the first step (s)",
              "an image size's start (s)", "an epoch's start (s)"]
    rows = [[setup.recipe, setup.setup, setup.precision,
             "unrecorded (one per core)" if setup.decoding_workers is None else str(setup.decoding_workers),
             f"{setup.setup_seconds:.2f}", f"{setup.size_start_seconds:.2f}", f"{setup.epoch_start_seconds:.2f}"]
            for setup in costs.setups.values()]
    return header, rows


def model_error(record: RunRecord, modelled: ModelledTime) -> float:
    """The modelled time's error relative to the measured one (0.03: 3% too long).

        >>> round(model_error(RunRecord.made_up(seconds=100.0), ModelledTime(95.0, 5.0, 1.0, 1.0)), 6)
        0.02
    """
    return modelled.seconds / record.train_seconds - 1


def _run_rows(records: Sequence[RunRecord], modelled: dict[tuple, ModelledTime]) -> tuple[list[str], list[list[str]]]:
    header = ["run", "measured on", "in", "measured (s)", "modelled (s)", "error", "steps", "decoding (s)",
              "starts (s)", "setup (s)"]
    rows = [[record.label, record.machine, record.precision or "unrecorded", f"{record.train_seconds:.1f}",
             f"{modelled[record.key].seconds:.1f}",
             f"{100 * model_error(record, modelled[record.key]):+.1f}%", str(record.steps),
             f"{modelled[record.key].decoding_seconds:.1f}", f"{modelled[record.key].starts_seconds:.1f}",
             f"{modelled[record.key].setup_seconds:.1f}"] for record in records]
    return header, rows


def error_summary(records: Sequence[RunRecord], modelled: dict[tuple, ModelledTime]) -> str:
    """One sentence on the model's error over ``records``: mean absolute, largest, and the mean signed error.

        >>> error_summary([RunRecord.made_up(seconds=100.0)], {RunRecord.made_up().key: ModelledTime(104, 0, 0, 0)})
        'Over 1 runs the modelled time is off by 4.0% on average (largest 4.0%, r x1 seed 0); mean signed error +4.0%.'
    """
    errors = {record.label: model_error(record, modelled[record.key]) for record in records}
    worst = max(errors, key=lambda label: abs(errors[label]))
    mean_size = 100 * statistics.fmean(map(abs, errors.values()))
    return (f"Over {len(errors)} runs the modelled time is off by {mean_size:.1f}% on average (largest "
            f"{100 * abs(errors[worst]):.1f}%, {worst}); mean signed error {100 * statistics.fmean(errors.values()):+.1f}%.")


def write_cost_report(records: Sequence[RunRecord], left_out: Sequence[Run], modelled: dict[tuple, ModelledTime],
                      costs: StepCosts, out: Path, baseline: str, *, timed_here: bool) -> list[Path]:
    """Write costs.json (when ``timed_here``), costs.md, modelled-vs-measured.md, the report on modelled times to
    ``out`` and the report on measured times to ``out/measured``; the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    if timed_here:
        write_costs(costs, out / COSTS_JSON)
        written.append(out / COSTS_JSON)
    library = ", ".join(f"{name} {version}" for name, version in costs.library.items())
    (out / COSTS_MD).write_text(f"""# Step costs on {costs.machine}

{costs.rounds} rounds; in each, every window of {costs.warmup} start-up steps and up to {costs.timed} timed steps,
twice: with every image decoded, then with every image kept by the decoding workers; {library}.
Each kind's time is the median over rounds of its mean step time in a round.

{markdown_table(*_setup_rows(costs))}

{markdown_table(*_kind_rows(costs))}
""")
    (out / CHECK_MD).write_text(f"""{error_summary(records, modelled)} A run measured beside other work, or on another
machine, is not expected to match (the machine column names where each run was measured).

{markdown_table(*_run_rows(records, modelled))}
""")
    written += [out / COSTS_MD, out / CHECK_MD]
    repriced = [modelled_record(record, modelled[record.key], costs.machine) for record in records]
    written += build_report([*repriced, *left_out], out, baseline)
    written += build_report([*records, *left_out], out / MEASURED, baseline)
    return written


def time_records(records: Sequence[RunRecord], configs: dict[tuple, TrainConfig],
                 build: Callable[[TrainConfig], object], *, costs: StepCosts | None, rounds: int, threads: int,
                 progress: bool) -> tuple[dict[tuple, RunPlan], StepCosts | None]:
    """Plan every run (``configs``: each one's, by key: :func:`record_config`) and, without ``costs`` (an earlier
    pass's step times), time every kind of their steps here (see :func:`measure`)."""
    plans, windows = plan_records(records, configs, build, costs)
    if costs is not None:
        return plans, None
    recipes = {setup_hash(configs[record.key]): record.recipe for record in records}
    return plans, measure(windows, build, rounds=rounds, threads=threads, recipes=recipes, progress=progress)


def model_runs(records: Sequence[RunRecord], plans: dict[tuple, RunPlan], costs: StepCosts,
               source: str = "the step times timed here") -> dict[tuple, ModelledTime]:
    """Each run's modelled time; ValueError naming the first run that takes a kind of step ``costs`` never timed, or
    whose modelled time is no finite number of seconds > 0 (``source``, where ``costs`` came from, named): a run
    takes time, and its measured throughput is rescaled by it."""
    for record in records:
        missing = costs.missing(plans[record.key])
        if missing:
            raise ValueError(f"run {record.label} takes steps the step times never cover ({missing[0].describe()} "
                             f"of setup {missing[0].setup}); time them: leave --times out")
    modelled = {record.key: costs.modelled(plans[record.key]) for record in records}
    for record in records:
        parts = modelled[record.key]
        problem = None if math.isfinite(parts.seconds) and parts.seconds > 0 else "a run takes a finite time > 0"
        if problem is None:
            try:  # the record the report writes (its throughput rescaled by the time), before anything is written
                modelled_record(record, parts, costs.machine)
            except (TypeError, ValueError) as error:
                problem = str(error)
        if problem is not None:
            raise ValueError(f"run {record.label}: {source} give it a modelled time of {parts.seconds:g} s (steps "
                             f"{parts.steps_seconds:g}, decoding {parts.decoding_seconds:g}, starts "
                             f"{parts.starts_seconds:g}, setup {parts.setup_seconds:g}), which cannot be: {problem}; "
                             f"time the steps again (leave --times out)")
    return modelled


def price_runs(folders: Sequence[Path], out: Path, *, data: Path | None, subset: int | None, device: str,
               times: Path | None, rounds: int, threads: int | None, baseline: str | None,
               progress: bool = True, assignments: Sequence[str] = ()) -> None:
    """The cost pass: time every kind of step the runs of ``folders`` took, here (or take the step times of an
    earlier pass's ``times``), and write the reports on modelled times into ``out`` (see the module's doc).

    Every input is checked before any step is timed; ValueError (TypeError, OSError) names what cannot work,
    and nothing is written. ``threads``: PyTorch's threads on a CPU (None: as ``python -m fastcore_ops.training.train``
    chooses), ``rounds``: how many times each window of steps is timed, ``assignments``: the ``--set``
    overrides of runs whose folders no longer hold their configuration (see :func:`record_config`).
    """
    runs = merge_records(read_priced_runs(folder) for folder in folders)
    records, left_out = split_runs(runs)
    if not records:
        raise ValueError(f"--cost {' '.join(map(str, folders))}: the folders hold no finished run to price")
    common_metric(records)
    for recipe in dict.fromkeys(record.recipe for record in records if record.recipe in list_recipes()):
        run_config(PlannedRun(recipe, 1.0, 0, 0.0), assignments)  # a --set that applies to no run is refused now
    costs = read_costs(times) if times is not None else None
    baseline = choose_baseline(baseline, list(dict.fromkeys(run.recipe for run in runs)))
    configs = {record.key: record_config(record, folders, assignments) for record in records}
    for task in dict.fromkeys(task_named(config.task) for config in configs.values()):
        task.check_inputs(data, subset)  # the --data and --subset the runs trained with, as their task takes them
    check_claimable(out, "tradeoff")
    check_claimable(out / MEASURED, "tradeoff")
    if backend.INTERPRETING:  # the last check: the suite runs the others under the interpreter
        raise ValueError("Triton's interpreter is on (FASTCORE_OPS_INTERPRET=1 or TRITON_INTERPRET=1): steps timed "
                         "through it mean nothing; unset it to time the steps")
    on = torch.device(device)
    if on.type == "cpu":
        print(use_threads(threads).describe())
        keep_freed_memory()  # as python -m fastcore_ops.training.train does, so the steps run as the runs' did
    build = functools.partial(build_trainer, data=data, out=None, device=on, subset=subset, progress=False,
                              eval_every=0)
    plans, timed = time_records(records, configs, build, costs=costs, rounds=rounds, threads=torch.get_num_threads(),
                                progress=progress)
    costs = costs or timed
    modelled = model_runs(records, plans, costs, f"the step times in {times}" if times is not None else
                          "the step times timed here")
    claim_out(out, "tradeoff")
    claim_out(out / MEASURED, "tradeoff")
    write_cost_report(records, left_out, modelled, costs, out, baseline, timed_here=times is None)
