"""``python -m training.tradeoff``: train recipes over budgets and seeds, then report quality against training time.

    python -m training.tradeoff --recipes cifar_baseline,cifar_mild,cifar_medium --budgets 0.25,0.5,1,2 \\
        --seeds 3 --data ../shared/datasets/cifar10-jpeg --out reports/cifar
    python -m training.tradeoff --merge reports/laptop reports/gpu --out reports/merged
    python -m training.tradeoff --cost reports/laptop reports/gpu --data ../shared/datasets/cifar10-jpeg \
        --out reports/costed   # every run priced on this machine (training/tradeoff/costing.py)

Every input is checked before any training or any write, recipes of tasks with different metrics
included (each finished run's metric is checked again), and so is ``--out``: it must be new,
empty, or written by this tool before (it then holds its marker, ``.fastcore_ops-tradeoff``), so
a folder of someone else's files is never written into. A run that fails or diverges is left
out of the curves and listed in the report with why and its log; the sweep goes on with the
others. Exit codes: 0 done (diverged runs included), 1 a run failed (rerun the same command to
retry it), 2 bad input (one ``error:`` line, nothing written), 128+signal when stopped (rerun
the same command to resume; the report then holds the runs finished so far).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from fastcore_ops import cli
from fastcore_ops.cli import check_device, refuse
from fastcore_ops.host_memory import keep_freed_memory
from fastcore_ops.kernels import backend
from fastcore_ops.owned_folder import check_claimable, claim_folder
from training.assemble import build_trainer
from training.compute_threads import use_threads
from training.config import TrainConfig
from training.recipes import list_recipes
from training.tasks.classification import split_folders
from training.tradeoff.cost_pass import read_costs
from training.tradeoff.costing import CHECK_MD, COSTS_MD, MEASURED, model_runs, time_records, write_cost_report
from training.tradeoff.report import build_report
from training.tradeoff.metric import one_metric
from training.tradeoff.results import (FAILED, FailedRun, Run, RunRecord, common_metric, judged_by, machine_label,
                                       merge_records, read_results, split_runs)
from training.tradeoff.sweep import (RUNS, PlannedRun, SweepInterrupted, TrainOptions, Variant, check_finished_runs,
                                     expected_metric, plan_sweep, read_outcome, run_config, run_sweep)
from training.tradeoff.tables import left_out_note

SWEEP_ONLY = {"recipes": "--recipes", "budgets": "--budgets", "data": "--data", "subset": "--subset",
              "assignments": "--set"}  # argument name -> flag


def build_parser() -> cli.ArgumentParser:
    """The command line of ``python -m training.tradeoff``."""
    parser = cli.ArgumentParser(prog="python -m training.tradeoff", description=cli.description(__doc__))
    parser.add_argument("--recipes", help=f"comma-separated recipe names; known: {', '.join(list_recipes())}")
    parser.add_argument("--budgets", help="comma-separated scale-schedule ratios > 0, e.g. 0.25,0.5,1,2")
    parser.add_argument("--seeds", type=int, default=1, help="seeds per recipe and budget")
    parser.add_argument("--first-seed", type=int, default=0,
                        help="the first seed: the runs use seeds FIRST to FIRST+N-1; a sweep that reports a speed-up "
                             "runs on seeds its recipes were not searched on")
    parser.add_argument("--data", type=Path, help="image classification: folder with train/ and val/ (or test/) "
                                                   "ImageFolders; language models: a text folder or prepared tokens "
                                                   "(default: the recipe's own text)")
    parser.add_argument("--out", type=Path, required=True, help="report folder; the runs go to OUT/runs/")
    parser.add_argument("--subset", type=int, help="train on the first N images of each class (passed to train)")
    cli.add_device_option(parser)
    parser.add_argument("--set", dest="assignments", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                        help="configuration override passed to every run; repeatable")
    parser.add_argument("--baseline", help="the recipe the others are compared with (default: the first recipe "
                                           "whose name holds 'baseline', else the first recipe)")
    parser.add_argument("--merge", nargs="+", type=Path, metavar="FOLDER",
                        help="rebuild the report from these folders' results.json, without training")
    parser.add_argument("--judge", action="append", default=[], metavar="RECIPE=METRIC",
                        help="with --merge: also draw RECIPE's runs judged by another metric they report, as a curve "
                             "of its own (cifar_mild=top1_tta: with test-time augmentation); repeatable")
    parser.add_argument("--cost", nargs="+", type=Path, metavar="FOLDER",
                        help="time every kind of step these folders' runs took, on this machine with nothing else "
                             "running, and report on the modelled times (needs the runs' --data)")
    parser.add_argument("--times", type=Path, metavar="COSTS_JSON",
                        help="with --cost: take the step times from an earlier cost pass's costs.json instead of "
                             "timing them")
    parser.add_argument("--rounds", type=cli.positive_int,
                        help="with --cost: how many times each window of steps is timed (default: 3)")
    parser.add_argument("--threads", type=cli.positive_int,
                        help="with --cost on a CPU: PyTorch's threads (default: as python -m training.train "
                             "chooses); time with the threads the runs trained with")
    cli.add_no_progress_option(parser)
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def parse_recipes(text: str) -> list[str]:
    """The recipe names in a comma-separated list, each known and given once.

    Example:
        >>> parse_recipes("cifar_baseline, cifar_mild")
        ['cifar_baseline', 'cifar_mild']
    """
    return cli.check_names("--recipes", text, list_recipes(), "recipe")


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


def default_baseline(recipes: list[str]) -> str:
    """The first recipe whose name holds "baseline", else the first recipe.

    Example:
        >>> default_baseline(["cifar_mild", "cifar_baseline"])
        'cifar_baseline'
    """
    return next((name for name in recipes if "baseline" in name), recipes[0])


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


def _choose_baseline(requested: str | None, recipes: list[str]) -> str:
    if requested is None:
        return default_baseline(recipes)
    return cli.check_name("--baseline", requested, recipes, "recipe among those compared")


def check_one_metric(configs: dict[str, TrainConfig]) -> None:
    """Refuse recipes whose tasks report different metrics: one report compares one metric.

    Example:
        >>> from training.recipes import get_recipe
        >>> check_one_metric({name: get_recipe(name) for name in ("cifar_baseline", "gpt_baseline")})
        Traceback (most recent call last):
        ...
        ValueError: the runs do not share one metric, ...: cifar_baseline measure top1 (top-1 (%), higher is better); gpt_baseline measure eval_loss (...). Sweep or merge ...
    """
    known = [(recipe, metric) for recipe, config in configs.items() if (metric := expected_metric(config)) is not None]
    if known:  # a task the sweep does not know yet is checked from its runs' summaries
        one_metric(known)


def check_sweep_data(configs: dict[str, TrainConfig], data: Path | None, subset: int | None) -> None:
    """Refuse, before any training, data the recipes' tasks cannot use (images need --data; --subset is for images).

    Example:
        >>> from training.recipes import get_recipe
        >>> check_sweep_data({"gpt_baseline": get_recipe("gpt_baseline")}, None, None)   # its own text
    """
    images = [name for name, config in configs.items() if config.task == "image_classification"]
    others = [name for name in configs if name not in images]
    if images and data is None:
        raise ValueError(f"--data is required for the image-classification recipes {', '.join(images)}: "
                         f"a folder with train/ and val/ (or test/)")
    if images:
        split_folders(data)
    if others and subset is not None:
        raise ValueError(f"--subset (images per class) applies to image classification only, and "
                         f"{', '.join(others)} are not; leave it out")


@dataclass(frozen=True)
class SweepRequest:
    """What a sweep command asks for; :func:`sweep` checks and runs it (the tradeoff and ablation commands).

    variants: the curves, recipe names or :class:`Variant` (a recipe with ``--set`` values of its
    own). assignments: ``--set`` values for every run. report: writes the report from the runs,
    the output folder and the baseline's name (default: the tradeoff report).
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
                           subset=request.subset, assignments=tuple(request.assignments))
    return execute_sweep(plan, request.out, options, request.baseline, tool=request.tool, progress=request.progress,
                         report=request.report)


def _sweep(args: argparse.Namespace) -> int:
    try:
        for flag in ("recipes", "budgets"):
            if getattr(args, flag) is None:
                raise ValueError(f"--{flag} is required to run a sweep (or pass --merge FOLDER... to rebuild a report)")
        recipes, budgets = parse_recipes(args.recipes), parse_budgets(args.budgets)
        baseline = _choose_baseline(args.baseline, recipes)
    except ValueError as error:
        return refuse(error)
    return sweep(SweepRequest(recipes, budgets, args.seeds, args.data, args.subset, args.device, args.assignments,
                              args.out, baseline, first_seed=args.first_seed, progress=not args.no_progress))


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
            # The run's own summary is the authority (a task expected_metric does not know, a run folder from
            # before): stop at the first run that cannot share the report.
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


def _merge(args: argparse.Namespace) -> int:
    try:
        given = [flag for name, flag in SWEEP_ONLY.items() if getattr(args, name)]
        if given:
            raise ValueError(f"--merge rebuilds the report from existing results; it takes no {', '.join(given)}")
        runs = merge_records(read_results(folder) for folder in args.merge)
        if not runs:
            raise ValueError(f"--merge {' '.join(map(str, args.merge))}: the folders hold no runs")
        for judge in args.judge:
            recipe, separator, metric = judge.partition("=")
            if not (separator and recipe and metric):
                raise ValueError(f"--judge expects RECIPE=METRIC (cifar_mild=top1_tta), got {judge!r}")
            runs = judged_by(runs, recipe, metric)
        records, _ = split_runs(runs)
        if records:
            common_metric(records)
        baseline = _choose_baseline(args.baseline, list(dict.fromkeys(run.recipe for run in runs)))
        claim_out(args.out, "tradeoff")  # the last check: it marks --out
    except (ValueError, OSError) as error:
        return refuse(error)
    written = build_report(runs, args.out, baseline)
    print(f"report: {written[-1]} ({len(runs)} runs; tables and figures next to it)")
    return 0


def _cost(args: argparse.Namespace) -> int:
    try:
        given = [flag for name, flag in SWEEP_ONLY.items() if getattr(args, name) and name not in ("data", "subset")]
        if given:
            raise ValueError(f"--cost prices existing runs; it takes no {', '.join(given)}")
        runs = merge_records(read_results(folder) for folder in args.cost)
        records, left_out = split_runs(runs)
        if not records:
            raise ValueError(f"--cost {' '.join(map(str, args.cost))}: the folders hold no finished run to price")
        common_metric(records)
        costs = read_costs(args.times) if args.times is not None else None
        baseline = _choose_baseline(args.baseline, list(dict.fromkeys(run.recipe for run in runs)))
        device = check_device(args.device)
        if any(record.sample_unit == "images" for record in records):
            if args.data is None:
                raise ValueError("--data is required to price image-classification runs: the data they trained on")
            split_folders(args.data)
        check_claimable(args.out, "tradeoff")
        check_claimable(args.out / MEASURED, "tradeoff")
        if backend.INTERPRETING:  # the last check: the suite runs the others under the interpreter
            raise ValueError("Triton's interpreter is on (FASTCORE_OPS_INTERPRET=1 or TRITON_INTERPRET=1): steps timed "
                             "through it mean nothing; unset it to time the steps")
    except (ValueError, TypeError, OSError) as error:
        return refuse(error)
    if device.type == "cpu":
        print(use_threads(args.threads).describe())
        keep_freed_memory()  # as python -m training.train does, so the steps run as the runs' did

    def build(config: TrainConfig):
        return build_trainer(config, data=args.data, out=None, device=device, subset=args.subset, progress=False,
                             eval_every=0)

    try:
        rounds = None if costs is not None else args.rounds or 3
        plans, timed = time_records(records, args.cost, build, rounds=rounds, threads=torch.get_num_threads(),
                                    progress=not args.no_progress)
        costs = costs or timed
        modelled = model_runs(records, plans, costs)
        claim_out(args.out, "tradeoff")
        claim_out(args.out / MEASURED, "tradeoff")
    except (ValueError, TypeError, OSError) as error:
        return refuse(error)
    write_cost_report(records, left_out, modelled, costs, args.out, baseline, timed_here=args.times is None)
    print(f"costs: {args.out / COSTS_MD}; the model against each run: {args.out / CHECK_MD}; reports on modelled "
          f"times: {args.out / 'report.html'}, on measured times: {args.out / MEASURED / 'report.html'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns its exit code."""
    try:
        args = parse_args(argv)
    except ValueError as error:
        return refuse(error)
    if args.merge and args.cost:
        return refuse("--merge and --cost each read folders of results; pass one of them")
    if args.judge and not args.merge:
        return refuse("--judge goes with --merge (it redraws finished runs); pass --merge FOLDER...")
    if args.cost:
        return _cost(args)
    cost_only = [flag for flag in ("times", "rounds", "threads") if getattr(args, flag) is not None]
    if cost_only:
        return refuse(f"--{cost_only[0]} goes with --cost (the cost pass); leave it out or pass --cost FOLDER...")
    return _merge(args) if args.merge else _sweep(args)
