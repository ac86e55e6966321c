"""Run every (recipe, budget, seed) of a sweep through ``python -m training.train``, resuming where it stopped.

Each run is a subprocess in its own folder ``<out>/runs/<recipe>-x<budget>-s<seed>``: a folder
with ``summary.json`` is finished and skipped, one with ``checkpoint.pt`` but no summary is
continued with ``--resume``, anything else starts afresh. A run that fails (training exits with
an error) is tried once and the sweep goes on with the others; rerunning the same command tries
it again. A stop signal is passed on to the running child, which checkpoints and exits;
rerunning the same command picks up from there.

The sweep deletes files only in an ``<out>`` marked as its tool's own (:mod:`fastcore_ops.owned_folder`),
and there only the names a run writes, left by a run stopped before its first checkpoint.

    >>> plan = plan_sweep(["cifar_baseline", "cifar_mild"], [0.5, 1.0], seeds=1, epochs={"cifar_baseline": 15.0,
    ...                   "cifar_mild": 8.0})
    >>> [(run.folder_name, run.units) for run in plan][:2]
    [('cifar_baseline-x0.5-s0', 7.5), ('cifar_baseline-x1-s0', 15.0)]
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from tqdm import tqdm

from fastcore_ops.owned_folder import owns
from training.config import TrainConfig, config_hash, load_config, override
from training.recipes import get_recipe
from training.checkpoint import CHECKPOINT_NAME, StopSignalHandler
from training.checkpoint import existing as existing_checkpoints
from training.run_folder import CONFIG_NAME, run_files_in
from training.plugins import import_arguments
from training.tasks.registry import task_named
from training.train import child_environment
from training.tradeoff.metric import Metric
from training.tradeoff.results import FAILED, MACHINE_FILE, FailedRun, Run, judge, read_machine, read_run

STDOUT_LOG, STDERR_LOG = "train.stdout.log", "train.stderr.log"
RUNS = "runs"  # the sweep's output folder holds one folder per run under this


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
    def of(cls, recipe: str) -> "Variant":
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
        return f"{self.recipe}-x{self.budget:g}-s{self.seed}"

    @property
    def trains(self) -> Variant:
        """What the run trains: its recipe and the assignments that change it."""
        return self.variant or Variant.of(self.recipe)


class RunState(Enum):
    FINISHED = "finished"
    RESUMABLE = "resumable"
    NEW = "new"


def plan_sweep(variants: Sequence[str | Variant], budgets: Sequence[float], seeds: int,
               epochs: dict[str, float], first_seed: int = 0) -> list[PlannedRun]:
    """Every run: seed by seed (``first_seed`` on, ``seeds`` of them), then curve by curve, then budget by
    budget (small first).

    Seeds go outermost so that a sweep stopped part-way already holds whole curves for its first seeds.
    variants: recipe names, or :class:`Variant` curves. epochs: each curve's effective epochs at
    budget 1, by name, the size proxy for the progress bar.
    """
    curves = [Variant.of(item) if isinstance(item, str) else item for item in variants]
    return [PlannedRun(curve.name, budget, seed, budget * epochs[curve.name], None if isinstance(item, str) else curve)
            for seed in range(first_seed, first_seed + seeds) for item, curve in zip(variants, curves) for budget in sorted(budgets)]


def run_state(folder: Path) -> RunState:
    """Whether the run in ``folder`` is finished, can be resumed, or has to start.

    Example:
        >>> run_state(Path("/nonexistent"))
        <RunState.NEW: 'new'>
    """
    if (folder / "summary.json").is_file():
        return RunState.FINISHED
    if existing_checkpoints(folder / CHECKPOINT_NAME):
        return RunState.RESUMABLE
    return RunState.NEW


def expected_metric(config: TrainConfig) -> Metric:
    """The metric runs of ``config`` will report, from its task (:mod:`training.tasks`).

    It lets a sweep refuse mixed tasks before training; the summary each run writes stays the
    authority: the sweep checks it again after every run.
    Example:
        >>> expected_metric(get_recipe("cifar_baseline"))
        Metric(name='top1', higher_is_better=True, label='top-1 (%)')
    """
    task = task_named(config.task)
    return Metric(task.metric, task.higher_is_better, task.metric_label)


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


def train_command(run: PlannedRun, folder: Path, options: TrainOptions, resume: bool) -> list[str]:
    """The ``python -m training.train`` command line for ``run``.

    Example:
        >>> options = TrainOptions(data=Path("data"), device="cpu", machine="h/cpu", assignments=("seed=1",))
        >>> train_command(PlannedRun("cifar_mild", 0.5, 2, 4.0), Path("runs/x"), options, resume=True)[3:]
        ['--recipe', 'cifar_mild', '--scale-schedule', '0.5', '--seed', '2', '--data', 'data', '--out', 'runs/x', '--no-progress', '--eval-every', '0', '--device', 'cpu', '--set', 'seed=1', '--resume']
    """
    # A curve needs only each run's final quality: no evaluation between epochs.
    data = [] if options.data is None else ["--data", str(options.data)]
    command = [sys.executable, "-m", "training.train", "--recipe", run.trains.recipe,
               "--scale-schedule", f"{run.budget!r}",
               "--seed", str(run.seed), *data, "--out", str(folder), "--no-progress",
               "--eval-every", "0", "--device", options.device]
    if options.subset is not None:
        command += ["--subset", str(options.subset)]
    for assignment in (*run.trains.assignments, *options.assignments):
        command += ["--set", assignment]
    command += import_arguments(list(options.imports))
    if resume:
        command.append("--resume")
    return command


class SweepInterrupted(Exception):
    """A stop signal arrived; the running child checkpointed. ``signal_number`` is the signal."""

    def __init__(self, signal_number: int, message: str):
        super().__init__(message)
        self.signal_number = signal_number


class _Forwarder(StopSignalHandler):
    """Passes SIGINT/SIGTERM on to the running child once, and remembers that one came."""

    def __init__(self):
        super().__init__()
        self.child: subprocess.Popen | None = None
        self.received: int | None = None

    def _handle(self, number, frame):
        if self.received is None and self.child is not None and self.child.poll() is None:
            self.child.send_signal(number)
        self.received = self.received or number

    def check(self, when: str) -> None:
        """Raise SweepInterrupted if a stop signal came; ``when`` says where the sweep stood ("before run x")."""
        if self.received is not None:
            raise SweepInterrupted(self.received, f"sweep stopped by signal {self.received} {when}; rerun the same "
                                                  f"command to resume")


def _last_line(path: Path) -> str:
    """The last non-empty line of a log ("" when there is none): a failed run's error, usually."""
    lines = path.read_text(errors="replace").splitlines() if path.is_file() else []
    return next((line.strip() for line in reversed(lines) if line.strip()), "")


def _clear_unstarted(folder: Path, out: Path, tool: str) -> None:
    """Remove what a run stopped before its first checkpoint left, so that it starts afresh (train refuses a
    folder holding a run's files): only when ``out`` is marked as ``tool``'s, and only the names a run writes."""
    if owns(out, tool):
        for name in run_files_in(folder):
            (folder / name).unlink()


def _train(run: PlannedRun, out: Path, options: TrainOptions, forwarder: _Forwarder, tool: str) -> int:
    """Train ``run`` in its folder under ``out``; returns the exit code of ``python -m training.train``."""
    folder = out / RUNS / run.folder_name
    forwarder.check(f"before {run.folder_name}")  # one that came between two runs starts no other
    resume = run_state(folder) is RunState.RESUMABLE
    if not resume:
        _clear_unstarted(folder, out, tool)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MACHINE_FILE).write_text(options.machine + "\n")
    with open(folder / STDOUT_LOG, "a") as stdout, open(folder / STDERR_LOG, "a") as stderr:
        # A session of its own, so a terminal's Ctrl-C reaches the child only once, through us.
        forwarder.child = subprocess.Popen(train_command(run, folder, options, resume), env=child_environment(),
                                           stdout=stdout, stderr=stderr, start_new_session=True)
        code = forwarder.child.wait()
    forwarder.check(f"during {run.folder_name} (checkpointed)")
    return code


def _exit_reason(code: int, log: Path) -> str:
    how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
    last = _last_line(log)
    return f"training {how}{': ' + last if last else ''}"


def read_outcome(run: PlannedRun, folder: Path, exit_code: int | None) -> Run:
    """What ``run`` left in ``folder``: its record, or a FailedRun (with its stderr log) saying why it is left out.

    exit_code: the training's exit code, None for a run finished before this sweep. Failed: a
    non-zero exit code, or a summary that is missing or cannot be read; diverged: see ``judge``.
    """
    log = folder / STDERR_LOG
    if exit_code:
        reason = _exit_reason(exit_code, log)
    else:
        try:
            return judge(read_run(folder, recipe=run.recipe, budget=run.budget, seed=run.seed), str(log))
        except (ValueError, FileNotFoundError) as error:
            reason = str(error)
    return FailedRun(read_machine(folder), run.recipe, run.budget, run.seed, FAILED, reason, str(log))


def run_sweep(plan: Sequence[PlannedRun], out: Path, options: TrainOptions, *, tool: str, progress: bool = True,
              on_finished: Callable[[PlannedRun, Path, int | None], None] = lambda run, folder, code: None) -> None:
    """Train every run of ``plan`` not yet finished under ``out/runs``, one at a time.

    One progress bar counts baseline-budget units over the whole sweep; its time left comes
    from the seconds per unit of the runs trained so far (finished runs from before do not
    count). ``on_finished(run, folder, exit_code)`` is called after each run: with the exit code
    of its training (0 finished, else failed), or None when it had finished before. A failed run
    does not stop the sweep. ``tool`` ("tradeoff", "ablate") is the owner ``out`` must be marked
    with for leftovers of unstarted runs to be removed. Raises SweepInterrupted.
    """
    runs_folder = out / RUNS
    done = sum(run.units for run in plan if run_state(runs_folder / run.folder_name) is RunState.FINISHED)
    # smoothing=0: the rate is the average since start, i.e. seconds per unit measured so far.
    bar = tqdm(total=sum(run.units for run in plan), initial=done, unit="unit", smoothing=0, disable=not progress,
               desc="sweep", bar_format="{l_bar}{bar}| {n:.2f}/{total:.2f} units [{elapsed}<{remaining}{postfix}]",
               dynamic_ncols=True)
    with bar, _Forwarder() as forwarder:
        for run in plan:
            folder = runs_folder / run.folder_name
            code = None
            if run_state(folder) is not RunState.FINISHED:
                started = time.perf_counter()
                bar.set_postfix_str(run.folder_name)
                code = _train(run, out, options, forwarder, tool)
                bar.update(run.units)
                bar.set_postfix_str(f"{(time.perf_counter() - started) / max(run.units, 1e-9):.1f} s/unit")
            on_finished(run, folder, code)


def run_config(run: PlannedRun, assignments: Sequence[str]) -> TrainConfig:
    """The configuration ``python -m training.train`` builds for ``run`` (same overrides, same order:
    the variant's own, then the sweep's ``assignments``).

    Example:
        >>> run_config(PlannedRun("cifar_mild", 0.5, 2, 4.0), ["data.batch_size=32"]).schedule.scale_schedule_ratio
        0.5
    """
    flags = [f"seed={run.seed}", f"schedule.scale_schedule_ratio={run.budget!r}"]
    return override(get_recipe(run.trains.recipe), [*flags, *run.trains.assignments, *assignments])


def check_finished_runs(plan: Sequence[PlannedRun], runs_folder: Path, assignments: Sequence[str]) -> None:
    """Refuse to reuse a finished run whose saved configuration is not the one this sweep asks for.

    One whose configuration cannot be read is left to :func:`read_outcome`, which lists it as failed, naming the file.
    """
    for run in plan:
        folder = runs_folder / run.folder_name
        if run_state(folder) is RunState.FINISHED:
            try:
                saved = config_hash(load_config(folder / CONFIG_NAME))
            except ValueError:
                continue
            wanted = config_hash(run_config(run, assignments))
            if saved != wanted:
                raise ValueError(f"--out: {folder} holds a finished run with another configuration ({saved}, this "
                                 f"sweep asks for {wanted}); use another --out or the same --set values as before")
