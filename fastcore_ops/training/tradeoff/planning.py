"""The plan of a sweep: every run it asks for, checked before any training or any write.

A command (``python -m fastcore_ops.training.tradeoff``, ``python -m fastcore_ops.training.ablate``) parses its arguments
into a :class:`SweepRequest` (its parser already refused malformed budgets, counts and devices:
:func:`fastcore_ops.training.tradeoff.options.budget_list`, :func:`fastcore_ops.cli.positive_int`, ...). :func:`plan_sweep` checks the
rest in one pass, writing nothing: the curves' configurations, their one metric, the data their
tasks need, ``--out`` and the finished runs already there. It returns the :class:`SweepPlan` that
:func:`fastcore_ops.training.tradeoff.sweep.execute_sweep` trains, after marking ``--out`` as the tool's
(:func:`fastcore_ops.training.tradeoff.options.claim_out`).

    >>> request = SweepRequest(["gpt_baseline"], [0.5, 1.0], 2, None, None, "cpu", [], out / "sweep",
    ...                        "gpt_baseline", first_seed=2)
    >>> [run.folder_name for run in plan_sweep(request).runs]
    ['gpt_baseline-x0.5-s2', 'gpt_baseline-x1-s2', 'gpt_baseline-x0.5-s3', 'gpt_baseline-x1-s3']
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from fastcore_ops import cli
from fastcore_ops.owned_folder import check_claimable
from fastcore_ops.training.config import TrainConfig, load_config, override
from fastcore_ops.training.recipes import get_recipe, list_recipes
from fastcore_ops.training.run_folder import CONFIG_NAME, RunState, resume_differences, run_state
from fastcore_ops.training.tasks.registry import task_named
from fastcore_ops.training.tradeoff.machine import machine_label
from fastcore_ops.training.tradeoff.metric import Metric, one_metric
from fastcore_ops.training.tradeoff.results import Run

RUNS = "runs"  # the sweep's output folder holds one folder per run under this
RESERVED = ("seed", "schedule.scale_schedule_ratio")  # what the sweep sets in each run itself


def parse_recipes(text: str) -> list[str]:
    """The recipe names in a comma-separated list (``--recipes``), each known and given once.

    Example:
        >>> parse_recipes("cifar_baseline, cifar_mild")
        ['cifar_baseline', 'cifar_mild']
    """
    return cli.check_names("--recipes", text, list_recipes(), "recipe")


@dataclass(frozen=True)
class Variant:
    """One curve of a sweep: ``recipe`` changed by ``assignments`` (``--set`` values), named ``name``.

    The tradeoff tool's curves are recipes as they are (:meth:`of`); an ablation's are its base
    recipe with one method added or removed.

        >>> Variant("cifar_baseline+cutout", "cifar_baseline", ("methods.cutout={}",)).assignments
        ('methods.cutout={}',)
    """

    name: str
    recipe: str
    assignments: tuple[str, ...] = ()

    @classmethod
    def of(cls, recipe: str) -> Variant:
        return cls(recipe, recipe)


@dataclass(frozen=True)
class PlannedRun:
    """One training run of the sweep; ``units`` is its size in baseline-budget units (budget x epochs).

    ``recipe`` names the run's curve (its variant's name) in folders and results; ``variant``
    says what it trains (None: the recipe ``recipe`` as it is).
    """

    recipe: str
    budget: float
    seed: int
    units: float
    variant: Variant | None = None

    @property
    def folder_name(self) -> str:
        """The run's folder under ``runs/``; its recipe must be a plain name (:func:`name_problem`) where it was read
        from a file."""
        return f"{self.recipe}-x{self.budget:g}-s{self.seed}"

    @property
    def trains(self) -> Variant:
        """What the run trains: its recipe and the assignments that change it."""
        return self.variant or Variant.of(self.recipe)


def name_problem(name) -> str | None:
    """Why ``name``, a recipe's name read from a file (results.json, a run's config.json), cannot name a run's folder
    (:attr:`PlannedRun.folder_name`); None when it can. A name from a file is never followed out of its folder: it
    must be a non-empty, printable str without a path separator or "..".

        >>> name_problem("cifar_mild+cutout"), name_problem("../x")
        (None, "holds a path separator or '..'")
    """
    if not isinstance(name, str) or not name:
        return "is empty or not a str"
    if not name.isprintable():
        return "holds a control character"
    if "/" in name or "\\" in name or ".." in name:
        return "holds a path separator or '..'"
    return None


@dataclass(frozen=True)
class TrainOptions:
    """What every run of the sweep shares: the data (None: each recipe's default) and the train command's options.

    imports: the modules each run imports first (``--import``), for tasks and recipes defined outside ``training``.
    """

    data: Path | None
    device: str
    machine: str
    subset: int | None = None
    assignments: tuple[str, ...] = ()
    imports: tuple[str, ...] = ()


Report = Callable[[list[Run], Path, str], list[Path]]


@dataclass(frozen=True)
class SweepRequest:
    """What a sweep command asks for, its flags already parsed (the tradeoff and ablation commands).

    variants: the curves, recipe names or :class:`Variant` (a recipe with ``--set`` values of its
    own). device: a device name as ``--device`` checks it (:func:`fastcore_ops.cli.device_name`).
    assignments: ``--set`` values for every run. report: writes the report from the runs,
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
    report: Report | None = None
    imports: tuple[str, ...] = ()


@dataclass(frozen=True)
class SweepPlan:
    """A checked sweep: its runs in training order, the folder it owns, and how to train and report them."""

    runs: list[PlannedRun]
    out: Path
    options: TrainOptions
    baseline: str
    tool: str = "tradeoff"
    progress: bool = True
    report: Report | None = None


def planned_runs(variants: Sequence[str | Variant], budgets: Sequence[float], seeds: int,
                 epochs: dict[str, float], first_seed: int = 0) -> list[PlannedRun]:
    """Every run: seed by seed (``first_seed`` on, ``seeds`` of them), then curve by curve, then budget by
    budget (small first).

    Seeds go outermost so that a sweep stopped part-way already holds whole curves for its first seeds.
    variants: recipe names, or :class:`Variant` curves. epochs: each curve's effective epochs at
    budget 1, by name, the size proxy for the progress bar.

        >>> plan = planned_runs(["cifar_baseline", "cifar_mild"], [0.5, 1.0], seeds=1,
        ...                     epochs={"cifar_baseline": 15.0, "cifar_mild": 8.0})
        >>> [(run.folder_name, run.units) for run in plan][:2]
        [('cifar_baseline-x0.5-s0', 7.5), ('cifar_baseline-x1-s0', 15.0)]
    """
    curves = _curves(variants)
    return [PlannedRun(curve.name, budget, seed, budget * epochs[curve.name], None if isinstance(item, str) else curve)
            for seed in range(first_seed, first_seed + seeds) for item, curve in zip(variants, curves)
            for budget in sorted(budgets)]


def run_config(run: PlannedRun, assignments: Sequence[str]) -> TrainConfig:
    """The configuration ``python -m fastcore_ops.training.train`` builds for ``run`` (same overrides, same order:
    the variant's own, then the sweep's ``assignments``).

    Example:
        >>> run_config(PlannedRun("cifar_mild", 0.5, 2, 4.0), ["data.batch_size=32"]).schedule.scale_schedule_ratio
        0.5
    """
    flags = [f"seed={run.seed}", f"schedule.scale_schedule_ratio={run.budget!r}"]
    return override(get_recipe(run.trains.recipe), [*flags, *run.trains.assignments, *assignments])


def plan_sweep(request: SweepRequest) -> SweepPlan:
    """Check everything ``request`` asks for and return the plan; writes nothing (:func:`execute_sweep` marks
    ``--out`` as the tool's first).

    ValueError (TypeError for a value of the wrong type) names the first thing that cannot work:
    a ``--set`` of what the sweep sets itself, a configuration that does not build, curves whose
    tasks report different metrics, data a task cannot use, an ``--out`` the tool may not write
    into or whose finished runs had another configuration.
    """
    curves = _curves(request.variants)
    for assignment in [*request.assignments, *(own for curve in curves for own in curve.assignments)]:
        if assignment.partition("=")[0].strip() in RESERVED:
            raise ValueError(f"--set {assignment}: the sweep sets each run's seed and budget; "
                             f"use --seeds and --budgets instead")
    configs = {curve.name: _curve_config(curve, request.assignments) for curve in curves}
    tasks = {name: task_named(config.task) for name, config in configs.items()}
    one_metric([(name, Metric(task.metric, task.higher_is_better, task.metric_label)) for name, task in tasks.items()])
    for name, task in tasks.items():
        try:
            task.check_inputs(request.data, request.subset)
        except ValueError as error:
            raise ValueError(f"recipe {name}: {error}") from None
    epochs = {name: config.schedule.epochs for name, config in configs.items()}
    runs = planned_runs(request.variants, request.budgets, request.seeds, epochs, first_seed=request.first_seed)
    _check_out(request.out, request.tool, runs, configs)
    data = None if request.data is None else request.data.resolve()
    options = TrainOptions(data=data, device=request.device, machine=machine_label(request.device),
                           subset=request.subset, assignments=tuple(request.assignments), imports=request.imports)
    return SweepPlan(runs, request.out, options, request.baseline, request.tool, request.progress, request.report)


def _curves(variants: Sequence[str | Variant]) -> list[Variant]:
    return [Variant.of(item) if isinstance(item, str) else item for item in variants]


def _curve_config(curve: Variant, assignments: Sequence[str]) -> TrainConfig:
    """The curve's configuration at seed 0 and budget 1, built now so that a bad ``--set`` fails before any
    training; a run's own differs only in those two (:func:`_at`)."""
    try:
        return run_config(PlannedRun(curve.name, 1.0, 0, 1.0, curve), assignments)
    except (TypeError, ValueError) as error:
        if curve == Variant.of(curve.recipe):
            raise
        raise ValueError(f"variant {curve.name}: {error}") from None


def _at(config: TrainConfig, run: PlannedRun) -> TrainConfig:
    """``config`` (its curve's) at ``run``'s seed and budget: :func:`run_config` of ``run``, without building it
    again (both fields were checked where they entered, and no assignment may set them: :data:`RESERVED`)."""
    schedule = dataclasses.replace(config.schedule, scale_schedule_ratio=run.budget)
    return dataclasses.replace(config, seed=run.seed, schedule=schedule)


def _check_out(out: Path, tool: str, runs: Sequence[PlannedRun], configs: dict[str, TrainConfig]) -> None:
    """Refuse an ``--out`` that ``tool`` may not write into (neither new, empty nor marked as its own: see
    :mod:`fastcore_ops.owned_folder`), or whose finished runs had another configuration than this sweep asks for.

    A run's configuration that cannot be read is left to the sweep's outcome, which lists it as failed, naming the
    file. Writes nothing.
    """
    wanted = [(run, _at(configs[run.recipe], run)) for run in runs]
    try:
        check_claimable(out, tool)
    except ValueError as error:
        raise ValueError(f"--out {error}") from None
    for run, config in wanted:
        folder = out / RUNS / run.folder_name
        if run_state(folder) is not RunState.FINISHED:
            continue
        try:
            saved = load_config(folder / CONFIG_NAME)
        except ValueError:
            continue
        if saved != config:
            changes = ", ".join(f"{name} {before!r} there, {after!r} here"
                                for name, before, after in resume_differences(saved, config)[:3])
            raise ValueError(f"--out: {folder} holds a finished run with another configuration ({changes}); use "
                             f"another --out or the same --set values as before")
