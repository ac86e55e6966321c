"""Train a checked sweep (:func:`execute_sweep`): every run through ``python -m fastcore_ops.training.train``, resuming
where it stopped, then its report.

Each run is a subprocess in its own folder ``<out>/runs/<recipe>-x<budget>-s<seed>``: a folder
with ``summary.json`` is finished and skipped, one with ``checkpoint.pt`` but no summary is
continued with ``--resume``, anything else starts afresh. A run that fails (training exits with
an error) is tried once and the sweep goes on with the others; rerunning the same command tries
it again. A stop signal is passed on to the running child, which checkpoints and exits;
rerunning the same command picks up from there. Exit codes: 0 done, 1 a run failed (the same
command retries it), 128+signal when stopped (the same command resumes).

The sweep deletes files only in an ``<out>`` marked as its tool's own (:mod:`fastcore_ops.owned_folder`),
and there only the names a run writes, left by a run stopped before its first checkpoint.

    >>> from fastcore_ops.training.tradeoff.planning import SweepRequest, plan_sweep
    >>> plan = plan_sweep(SweepRequest(["gpt_baseline"], [0.5, 1.0], 1, None, None, "cpu", [], out, "gpt_baseline"))
    >>> execute_sweep(plan)  # doctest: +SKIP
    0
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tqdm import tqdm

from fastcore_ops.cli import refuse
from fastcore_ops.owned_folder import owns
from fastcore_ops.training.checkpoint import StopSignalHandler
from fastcore_ops.training.plugins import import_arguments
from fastcore_ops.training.run_folder import RunState, run_files_in, run_state
from fastcore_ops.training.tradeoff.machine import MACHINE_FILE, read_machine
from fastcore_ops.training.tradeoff.options import choose_baseline, claim_out
from fastcore_ops.training.tradeoff.planning import (RUNS, PlannedRun, SweepPlan, SweepRequest, TrainOptions,
                                                     parse_recipes, plan_sweep)
from fastcore_ops.training.tradeoff.report import build_report
from fastcore_ops.training.tradeoff.results import FAILED, FailedRun, Run, RunRecord, common_metric, judge, read_run
from fastcore_ops.training.tradeoff.tables import left_out_note
from fastcore_ops.training.train import child_environment

STDOUT_LOG, STDERR_LOG = "train.stdout.log", "train.stderr.log"


def train_command(run: PlannedRun, folder: Path, options: TrainOptions, resume: bool) -> list[str]:
    """The ``python -m fastcore_ops.training.train`` command line for ``run``.

    Example:
        >>> options = TrainOptions(data=Path("data"), device="cpu", machine="h/cpu", assignments=("seed=1",))
        >>> train_command(PlannedRun("cifar_mild", 0.5, 2, 4.0), Path("runs/x"), options, resume=True)[3:]
        ['--recipe', 'cifar_mild', '--budget', '0.5', '--seed', '2', '--data', 'data', '--out', 'runs/x', '--no-progress', '--eval-every', '0', '--device', 'cpu', '--set', 'seed=1', '--resume']
    """
    # A curve needs only each run's final quality: no evaluation between epochs.
    data = [] if options.data is None else ["--data", str(options.data)]
    command = [sys.executable, "-m", "fastcore_ops.training.train", "--recipe", run.trains.recipe,
               "--budget", f"{run.budget!r}",
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
    """Train ``run`` in its folder under ``out``; returns the exit code of ``python -m fastcore_ops.training.train``."""
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


def run_sweep(plan: SweepPlan, *,
              on_finished: Callable[[PlannedRun, Path, int | None], None] = lambda run, folder, code: None) -> None:
    """Train every run of ``plan`` not yet finished under ``plan.out/runs``, one at a time.

    One progress bar counts baseline-budget units over the whole sweep; its time left comes
    from the seconds per unit of the runs trained so far (finished runs from before do not
    count). ``on_finished(run, folder, exit_code)`` is called after each run: with the exit code
    of its training (0 finished, else failed), or None when it had finished before. A failed run
    does not stop the sweep. Leftovers of unstarted runs are removed only while ``plan.out`` is
    marked as ``plan.tool``'s. Raises SweepInterrupted.
    """
    out = plan.out.resolve()
    runs_folder = out / RUNS
    done = sum(run.units for run in plan.runs if run_state(runs_folder / run.folder_name) is RunState.FINISHED)
    # smoothing=0: the rate is the average since start, i.e. seconds per unit measured so far.
    bar = tqdm(total=sum(run.units for run in plan.runs), initial=done, unit="unit", smoothing=0,
               disable=not plan.progress, desc="sweep", dynamic_ncols=True,
               bar_format="{l_bar}{bar}| {n:.2f}/{total:.2f} units [{elapsed}<{remaining}{postfix}]")
    with bar, _Forwarder() as forwarder:
        for run in plan.runs:
            folder = runs_folder / run.folder_name
            code = None
            if run_state(folder) is not RunState.FINISHED:
                started = time.perf_counter()
                bar.set_postfix_str(run.folder_name)
                code = _train(run, out, plan.options, forwarder, plan.tool)
                bar.update(run.units)
                bar.set_postfix_str(f"{(time.perf_counter() - started) / max(run.units, 1e-9):.1f} s/unit")
            on_finished(run, folder, code)


def progress_quality(record: RunRecord) -> str:
    """A finished run's quality for its progress line: "top-1 61.25%", "validation loss 1.234 nats/token".

    Example:
        >>> progress_quality(records[0])
        'top-1 50.00%'
    """
    metric = record.quality_metric
    return f"{metric.quantity} {metric.format(record.quality, precise=True)}"


def execute_sweep(plan: SweepPlan) -> int:
    """Mark ``plan.out`` as the plan's tool's, train the unfinished runs under ``plan.out/runs``, then report them
    (default: the tradeoff report, :func:`build_report`); returns the exit code.

    Each finished run is checked to share the others' metric and printed with its quality and
    time; a run that failed or diverged is printed with why and its log, and the sweep goes on.
    The report lists every run; the exit code says whether one failed (:func:`sweep_exit_code`).
    Stopped by a signal, it reports the runs finished so far and returns 128 + the signal.
    """
    report, out = plan.report or build_report, plan.out
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
        claim_out(out, plan.tool)
    except ValueError as error:
        return refuse(error)
    try:
        run_sweep(plan, on_finished=finished)
    except ValueError as error:  # a finished run measures another metric
        return refuse(f"{error}; the finished runs are kept under {out / RUNS}")
    except SweepInterrupted as stop:
        print(stop, file=sys.stderr)
        if runs:  # a sweep run in pieces shows what it has so far
            written = report(runs, out, plan.baseline)
            print(f"partial report of the {len(runs)} runs finished so far: {written[-1]}", file=sys.stderr)
        return 128 + stop.signal_number
    written = report(runs, out, plan.baseline)
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


def sweep_command(args: argparse.Namespace) -> int:
    """A sweep of a parsed command line (``--recipes``, ``--budgets``, ...): its plan (:func:`plan_sweep`), trained and
    reported (:func:`execute_sweep`); the exit code (2 with one ``error:`` line, nothing written, when an input cannot
    work)."""
    try:
        for flag in ("recipes", "budgets"):
            if getattr(args, flag) is None:
                raise ValueError(f"--{flag} is required to run a sweep (or pass --merge FOLDER... to rebuild a report)")
        recipes = parse_recipes(args.recipes)
        plan = plan_sweep(SweepRequest(recipes, args.budgets, args.seeds, args.data, args.subset, args.device,
                                       args.assignments, args.out, choose_baseline(args.baseline, recipes),
                                       first_seed=args.first_seed, progress=not args.no_progress,
                                       imports=tuple(args.imports)))
    except (ValueError, TypeError, OSError) as error:
        return refuse(error)
    return execute_sweep(plan)
