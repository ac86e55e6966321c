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
from pathlib import Path

import torch

from fastcore_ops import cli
from fastcore_ops.cli import refuse
from fastcore_ops.host_memory import keep_freed_memory
from fastcore_ops.kernels import backend
from fastcore_ops.owned_folder import check_claimable
from training.assemble import build_trainer
from training.compute_threads import use_threads
from training.config import TrainConfig
from training.plugins import add_import_option, import_modules
from training.recipes import list_recipes
from training.tasks.classification import split_folders
from training.tradeoff.cost_pass import read_costs
from training.tradeoff.costing import CHECK_MD, COSTS_MD, MEASURED, model_runs, time_records, write_cost_report
from training.tradeoff.report import build_report
from training.tradeoff.results import common_metric, judged_by, merge_records, read_results, split_runs
from training.tradeoff.planning import SweepRequest, budget_list, claim_out, plan_sweep
from training.tradeoff.sweep import execute_sweep

SWEEP_ONLY = {"recipes": "--recipes", "budgets": "--budgets", "data": "--data", "subset": "--subset",
              "assignments": "--set"}  # argument name -> flag


def build_parser() -> cli.ArgumentParser:
    """The command line of ``python -m training.tradeoff``."""
    parser = cli.ArgumentParser(prog="python -m training.tradeoff", description=cli.description(__doc__))
    parser.add_argument("--recipes", help=f"comma-separated recipe names; known: {', '.join(list_recipes())}")
    parser.add_argument("--budgets", type=budget_list,
                        help="comma-separated scale-schedule ratios > 0, e.g. 0.25,0.5,1,2")
    parser.add_argument("--seeds", type=cli.positive_int, default=1, help="seeds per recipe and budget")
    parser.add_argument("--first-seed", type=cli.non_negative_int, default=0,
                        help="the first seed: the runs use seeds FIRST to FIRST+N-1; a sweep that reports a speed-up "
                             "runs on seeds its recipes were not searched on")
    parser.add_argument("--data", type=Path, help="image classification: folder with train/ and val/ (or test/) "
                                                   "ImageFolders; language models: a text folder or prepared tokens "
                                                   "(default: the recipe's own text)")
    parser.add_argument("--out", type=Path, required=True, help="report folder; the runs go to OUT/runs/")
    parser.add_argument("--subset", type=cli.positive_int,
                        help="train on the first N images of each class (passed to train)")
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
    add_import_option(parser)
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


def default_baseline(recipes: list[str]) -> str:
    """The first recipe whose name holds "baseline", else the first recipe.

    Example:
        >>> default_baseline(["cifar_mild", "cifar_baseline"])
        'cifar_baseline'
    """
    return next((name for name in recipes if "baseline" in name), recipes[0])


def _choose_baseline(requested: str | None, recipes: list[str]) -> str:
    if requested is None:
        return default_baseline(recipes)
    return cli.check_name("--baseline", requested, recipes, "recipe among those compared")


def _sweep(args: argparse.Namespace) -> int:
    try:
        for flag in ("recipes", "budgets"):
            if getattr(args, flag) is None:
                raise ValueError(f"--{flag} is required to run a sweep (or pass --merge FOLDER... to rebuild a report)")
        recipes = parse_recipes(args.recipes)
        plan = plan_sweep(SweepRequest(recipes, args.budgets, args.seeds, args.data, args.subset, args.device,
                                       args.assignments, args.out, _choose_baseline(args.baseline, recipes),
                                       first_seed=args.first_seed, progress=not args.no_progress,
                                       imports=tuple(args.imports)))
    except (ValueError, TypeError, OSError) as error:
        return refuse(error)
    return execute_sweep(plan)


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
        device = torch.device(args.device)
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
        import_modules(args.imports)
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
