"""``python -m fastcore_ops.training.tradeoff``: train recipes over budgets and seeds, then report quality against training time.

    python -m fastcore_ops.training.tradeoff --recipes cifar_baseline,cifar_mild,cifar_medium --budgets 0.25,0.5,1,2 \\
        --seeds 3 --data ../shared/datasets/cifar10-jpeg --out reports/cifar
    python -m fastcore_ops.training.tradeoff --merge reports/laptop reports/gpu --out reports/merged
    python -m fastcore_ops.training.tradeoff --cost reports/laptop reports/gpu --data ../shared/datasets/cifar10-jpeg \
        --out reports/costed   # every run priced on this machine (fastcore_ops/training/tradeoff/costing.py)
    python -m fastcore_ops.training.tradeoff --adopt runs/seed-3 runs/seed-4 --out reports/adopted  # train's runs

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

from fastcore_ops import cli
from fastcore_ops.cli import refuse
from fastcore_ops.training.plugins import add_import_option, import_modules
from fastcore_ops.training.recipes import list_recipes
from fastcore_ops.training.tradeoff.options import add_cost_options, add_seed_options, budget_list, cost_only_flags

# The machinery each mode needs (torch with it) is imported once the command line is parsed.

SWEEP_ONLY = {"recipes": "--recipes", "budgets": "--budgets", "data": "--data", "subset": "--subset",
              "assignments": "--set"}  # argument name -> flag


def build_parser() -> cli.ArgumentParser:
    """The command line of ``python -m fastcore_ops.training.tradeoff``."""
    parser = cli.ArgumentParser(prog="python -m fastcore_ops.training.tradeoff", description=cli.description(__doc__))
    parser.add_argument("--recipes", help=f"comma-separated recipe names; known: {', '.join(list_recipes())}")
    parser.add_argument("--budgets", type=budget_list,
                        help="comma-separated scale-schedule ratios > 0, e.g. 0.25,0.5,1,2")
    add_seed_options(parser, seeds=1, first_seed=0)
    parser.add_argument("--data", type=Path, help="image classification: folder with train/ and val/ (or test/) "
                                                   "ImageFolders; language models: a text folder or prepared tokens "
                                                   "(default: the recipe's own text)")
    parser.add_argument("--out", type=Path, required=True, help="report folder; the runs go to OUT/runs/")
    parser.add_argument("--subset", type=cli.positive_int,
                        help="train on the first N images of each class (passed to train)")
    cli.add_device_option(parser)
    parser.add_argument("--set", dest="assignments", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                        help="configuration override passed to every run; repeatable; with --cost: the overrides of "
                             "runs whose folders no longer hold their config.json (each such run's recipe is rebuilt "
                             "as it is, then with them)")
    parser.add_argument("--baseline", help="the recipe the others are compared with (default: the first recipe "
                                           "whose name holds 'baseline', else the first recipe)")
    parser.add_argument("--merge", nargs="+", type=Path, metavar="FOLDER",
                        help="rebuild the report from these folders' results.json, without training")
    parser.add_argument("--judge", action="append", default=[], metavar="RECIPE=METRIC",
                        help="with --merge: also draw RECIPE's runs judged by another metric they report, as a curve "
                             "of its own (cifar_mild=top1_tta: with test-time augmentation); repeatable")
    parser.add_argument("--adopt", nargs="+", type=Path, metavar="RUN",
                        help="take these finished runs of python -m fastcore_ops.training.train into --out as a "
                             "tradeoff folder (each named by its config.json), for --merge and --cost")
    add_cost_options(parser, report="the tradeoff report")
    cli.add_no_progress_option(parser)
    add_import_option(parser)
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the command: parse it, refuse flags its mode does not take, and hand it to the mode's pipeline
    (:func:`~fastcore_ops.training.tradeoff.costing.cost_command`,
    :func:`~fastcore_ops.training.tradeoff.merging.merge_command`,
    :func:`~fastcore_ops.training.tradeoff.adopting.adopt_command`,
    :func:`~fastcore_ops.training.tradeoff.sweep.sweep_command`); returns its exit code."""
    try:
        args = parse_args(argv)
        import_modules(args.imports)
    except ValueError as error:
        return refuse(error)
    modes = [flag for flag in ("merge", "cost", "adopt") if getattr(args, flag)]
    if len(modes) > 1:
        return refuse(f"--{modes[0]} and --{modes[1]} are two modes; pass one of them")
    if args.judge and not args.merge:
        return refuse("--judge goes with --merge (it redraws finished runs); pass --merge FOLDER...")
    if args.cost:
        given = [flag for name, flag in SWEEP_ONLY.items()
                 if getattr(args, name) and name not in ("data", "subset", "assignments")]
        if given:
            return refuse(f"--cost prices existing runs; it takes no {', '.join(given)}")
        from fastcore_ops.training.tradeoff.costing import cost_command
        return cost_command(args, baseline=args.baseline)
    cost_only = cost_only_flags(args)
    if cost_only:
        return refuse(f"{cost_only[0]} goes with --cost (the cost pass); leave it out or pass --cost FOLDER...")
    if args.merge or args.adopt:
        given = [flag for name, flag in SWEEP_ONLY.items() if getattr(args, name)]
        if given:
            mode = "--merge" if args.merge else "--adopt"
            return refuse(f"{mode} reports on finished runs; it takes no {', '.join(given)}")
        if args.merge:
            from fastcore_ops.training.tradeoff.merging import merge_command
            return merge_command(args)
        from fastcore_ops.training.tradeoff.adopting import adopt_command
        return adopt_command(args)
    from fastcore_ops.training.tradeoff.sweep import sweep_command
    return sweep_command(args)
