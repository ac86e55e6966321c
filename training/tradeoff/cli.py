"""``python -m training.tradeoff``: train recipes over budgets and seeds, then report quality against training time.

    python -m training.tradeoff --recipes cifar_baseline,cifar_mild,cifar_medium --budgets 0.25,0.5,1,2 \\
        --seeds 3 --data ../shared/datasets/cifar10-jpeg --out reports/cifar
    python -m training.tradeoff --merge reports/laptop reports/gpu --out reports/merged

Every input is checked before any training, recipes of tasks with different metrics included
(each finished run's metric is checked again). Exit codes: 0 done, 1 a run failed, 2 bad input,
128+signal when stopped (rerun the same command to resume; the report then holds the runs
finished so far).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path

import torch
from tqdm import tqdm

from training.config import TrainConfig
from training.recipes import list_recipes
from training.tasks.classification import split_folders
from training.train import check_device
from training.tradeoff.report import build_report
from training.tradeoff.metric import one_metric
from training.tradeoff.results import RunRecord, common_metric, machine_label, merge_records, read_results, read_run
from training.tradeoff.sweep import (PlannedRun, RunFailed, SweepInterrupted, TrainOptions, check_finished_runs,
                                     expected_metric, plan_sweep, run_config, run_sweep)

SWEEP_ONLY = {"recipes": "--recipes", "budgets": "--budgets", "data": "--data", "subset": "--subset",
              "assignments": "--set"}  # argument name -> flag


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m training.tradeoff", description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipes", help=f"comma-separated recipe names; known: {', '.join(list_recipes())}")
    parser.add_argument("--budgets", help="comma-separated scale-schedule ratios > 0, e.g. 0.25,0.5,1,2")
    parser.add_argument("--seeds", type=int, default=1, help="seeds per recipe and budget: 0 to N-1 (default 1)")
    parser.add_argument("--data", type=Path, help="image classification: folder with train/ and val/ (or test/) "
                                                   "ImageFolders; language models: a text folder or prepared tokens "
                                                   "(default: the recipe's own text)")
    parser.add_argument("--out", type=Path, required=True, help="report folder; the runs go to OUT/runs/")
    parser.add_argument("--subset", type=int, help="train on the first N images of each class (passed to train)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--set", dest="assignments", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                        help="configuration override passed to every run; repeatable")
    parser.add_argument("--baseline", help="the recipe the others are compared with (default: the first recipe "
                                           "whose name holds 'baseline', else the first recipe)")
    parser.add_argument("--merge", nargs="+", type=Path, metavar="FOLDER",
                        help="rebuild the report from these folders' results.json, without training")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (for logs)")
    return parser.parse_args(argv)


def parse_names(text: str, known: list[str], flag: str, kind: str) -> list[str]:
    """The names in a comma-separated list, each among ``known`` and given once; ``flag`` and
    ``kind`` ("recipe", "method") word the errors.

    Example:
        >>> parse_names("a, b", ["a", "b", "c"], "--things", "thing")
        ['a', 'b']
    """
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise ValueError(f"{flag} {text!r}: no {kind} named; accepted: comma-separated names from {', '.join(known)}")
    for name in names:
        if name not in known:
            raise ValueError(f"{flag}: unknown {kind} {name!r}; accepted: {', '.join(known)}")
    if len(set(names)) != len(names):
        raise ValueError(f"{flag} {text!r}: a {kind} is named twice; name each once")
    return names


def parse_recipes(text: str) -> list[str]:
    """The recipe names in a comma-separated list, each known and given once.

    Example:
        >>> parse_recipes("cifar_baseline, cifar_mild")
        ['cifar_baseline', 'cifar_mild']
    """
    return parse_names(text, list_recipes(), "--recipes", "recipe")


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
    if requested not in recipes:
        raise ValueError(f"--baseline {requested!r} is not among the recipes compared ({', '.join(recipes)})")
    return requested


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


def _sweep(args: argparse.Namespace) -> int:
    try:
        for flag in ("recipes", "budgets"):
            if getattr(args, flag) is None:
                raise ValueError(f"--{flag} is required to run a sweep (or pass --merge FOLDER... to rebuild a report)")
        recipes, budgets = parse_recipes(args.recipes), parse_budgets(args.budgets)
        if args.seeds < 1:
            raise ValueError(f"--seeds must be >= 1 (seeds per recipe and budget), got {args.seeds}")
        if args.subset is not None and args.subset < 1:
            raise ValueError(f"--subset must be >= 1 (images per class), got {args.subset}")
        for assignment in args.assignments:
            if assignment.partition("=")[0].strip() in ("seed", "schedule.scale_schedule_ratio"):
                raise ValueError(f"--set {assignment}: the sweep sets each run's seed and budget; "
                                 f"use --seeds and --budgets instead")
        # Builds every run's configuration now, so a bad --set fails before any training.
        configs = {recipe: run_config(PlannedRun(recipe, 1.0, 0, 1.0), args.assignments) for recipe in recipes}
        check_one_metric(configs)
        check_sweep_data(configs, args.data, args.subset)
        device = str(check_device(args.device))
        baseline = _choose_baseline(args.baseline, recipes)
        epochs = {recipe: config.schedule.epochs for recipe, config in configs.items()}
        plan = plan_sweep(recipes, budgets, args.seeds, epochs)
        runs_folder = args.out / "runs"
        check_finished_runs(plan, runs_folder, args.assignments)
    except (ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    data = None if args.data is None else args.data.resolve()
    options = TrainOptions(data=data, device=device, machine=machine_label(device),
                           subset=args.subset, assignments=tuple(args.assignments))
    return execute_sweep(plan, args.out, options, baseline, progress=not args.no_progress)


def execute_sweep(plan: list[PlannedRun], out: Path, options: TrainOptions, baseline: str, *, progress: bool = True,
                  report: Callable[[list[RunRecord], Path, str], list[Path]] | None = None) -> int:
    """Train ``plan``'s unfinished runs under ``out/runs``, then ``report`` them (default: the
    tradeoff report, :func:`build_report`); returns the exit code.

    Each finished run is checked to share the others' metric and printed with its quality and
    time. Stopped by a signal, it reports the runs finished so far and returns 128 + the signal.
    Also the ablation tool's runner (``python -m training.ablate``), with its own ``report``.
    """
    runs_folder = out / "runs"
    report = report or build_report
    records: list[RunRecord] = []

    def finished(run: PlannedRun, folder: Path, trained: bool) -> None:
        record = read_run(folder, recipe=run.recipe, budget=run.budget, seed=run.seed)
        # The run's own summary is the authority (a task expected_metric does not know, a run folder from
        # before): stop at the first run that cannot share the report.
        common_metric([*records, record])
        records.append(record)
        note = "" if trained else " (finished before)"
        tqdm.write(f"{run.recipe} x{run.budget:g} seed {run.seed}: {progress_quality(record)} | "
                   f"train {record.train_seconds:.1f} s{note}")

    try:
        run_sweep(plan, runs_folder.resolve(), options, progress=progress, on_finished=finished)
    except RunFailed as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except ValueError as error:  # a finished run's summary is unreadable or measures another metric
        print(f"error: {error}; the finished runs are kept under {runs_folder}", file=sys.stderr)
        return 2
    except SweepInterrupted as stop:
        print(stop, file=sys.stderr)
        if records:  # a sweep run in pieces shows what it has so far
            written = report(records, out, baseline)
            print(f"partial report of the {len(records)} runs finished so far: {written[-1]}", file=sys.stderr)
        return 128 + stop.signal_number
    written = report(records, out, baseline)
    print(f"report: {written[-1]} ({len(records)} runs; tables and figures next to it)")
    return 0


def _merge(args: argparse.Namespace) -> int:
    try:
        given = [flag for name, flag in SWEEP_ONLY.items() if getattr(args, name)]
        if given:
            raise ValueError(f"--merge rebuilds the report from existing results; it takes no {', '.join(given)}")
        records = merge_records(read_results(folder) for folder in args.merge)
        if not records:
            raise ValueError(f"--merge {' '.join(map(str, args.merge))}: the folders hold no runs")
        common_metric(records)
        recipes = list(dict.fromkeys(record.recipe for record in records))
        baseline = _choose_baseline(args.baseline, recipes)
    except (ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    written = build_report(records, args.out, baseline)
    print(f"report: {written[-1]} ({len(records)} runs; tables and figures next to it)")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns its exit code."""
    args = parse_args(argv)
    return _merge(args) if args.merge else _sweep(args)
