"""``python -m fastcore_ops.training.ablate``: what each method is worth on its own, against a base recipe.

    python -m fastcore_ops.training.ablate --recipe cifar_baseline_small --methods all --seeds 2 \\
        --data ../shared/datasets/cifar10-jpeg --subset 500 --out reports/ablation
    python -m fastcore_ops.training.ablate --recipe cifar_baseline_small --cost reports/ablation \\
        --data ../shared/datasets/cifar10-jpeg --subset 500 --out reports/ablation-costed

Trains the base recipe and, for every method, the base with that method added (or, when the
base already has it, removed), at each budget and seed, through the tradeoff tool's runner:
same run folders, resumption (rerun the same command to continue), results files, curves and
HTML report, with every variant as one curve. It adds ``ablation.csv``/``.md``/``.png``: each
method's change in quality (seed by seed, in the metric's direction), in time per step, and,
with two or more budgets, its speedup at the base's quality. Every run also takes the base
task's ablation settings: image runs evaluate with test-time augmentation, so ``top1_tta``
gives that method's effect without a run of its own.
A run that diverges or fails is listed with why and its log, and left out of the effects (a
variant without a usable seed beside the base's is listed as not measured); the others go on.
``--out`` must be new, empty, or an ablation's own from before (marked ``.fastcore_ops-ablate``).
With ``--cost``, it trains nothing: it prices the finished runs of ablation folders on this machine,
as the tradeoff tool's cost pass does (:mod:`fastcore_ops.training.tradeoff.costing`), and writes the
ablation report on the modelled times, so that each method's time per step is measured in one sitting
with nothing else running, whatever shared the machine while its runs trained.
Exit codes as the tradeoff tool's: 0 done, 1 a run failed, 2 bad input (one ``error:`` line,
nothing written), 128+signal when stopped.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from fastcore_ops import cli
from fastcore_ops.training.plugins import add_import_option, import_modules
from fastcore_ops.training.recipes import list_recipes
from fastcore_ops.training.tradeoff.options import add_cost_options, add_seed_options, budget_list, cost_only_flags

SWEEP_ONLY = ("methods", "budgets", "seeds", "first_seed")  # what --cost, pricing finished runs, does not take


def build_parser() -> cli.ArgumentParser:
    """The command line of ``python -m fastcore_ops.training.ablate``."""
    parser = cli.ArgumentParser(prog="python -m fastcore_ops.training.ablate", description=cli.description(__doc__))
    parser.add_argument("--recipe", required=True,
                        help=f"the recipe every variant changes; known: {', '.join(list_recipes())}")
    parser.add_argument("--methods", default="all",
                        help="comma-separated methods, or 'all' (those that apply to the recipe's task); a name that "
                             "is not a method that trains is answered with the known ones")
    parser.add_argument("--budgets", type=budget_list, default=[1.0],
                        help="comma-separated scale-schedule ratios; two or more give each variant a curve and a "
                             "speedup")
    add_seed_options(parser, seeds=2)
    parser.add_argument("--data", type=Path, help="image classification: folder with train/ and val/ (or test/)")
    parser.add_argument("--subset", type=cli.positive_int, help="train on the first N images of each class")
    parser.add_argument("--out", type=Path, required=True, help="report folder; the runs go to OUT/runs/")
    cli.add_device_option(parser)
    parser.add_argument("--set", dest="assignments", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                        help="configuration override for every run, base included; repeatable")
    add_cost_options(parser, report="the ablation report, --recipe their base,")
    cli.add_no_progress_option(parser)
    add_import_option(parser)
    return parser


def sweep_flags_given(args: argparse.Namespace) -> list[str]:
    """The flags of :data:`SWEEP_ONLY` that ``args`` sets away from their defaults, which ``--cost`` refuses.

    Example:
        >>> sweep_flags_given(build_parser().parse_args(["--recipe", "r", "--out", "o", "--seeds", "3"]))
        ['--seeds']
    """
    parser = build_parser()
    return [f"--{name.replace('_', '-')}" for name in SWEEP_ONLY if getattr(args, name) != parser.get_default(name)]


@cli.command(build_parser)
def main(args: argparse.Namespace) -> int:
    """Run the command, the sweep or (``--cost``) the cost pass over finished ablations; returns its exit code."""
    from fastcore_ops.training.ablate.arms import ablation_arms  # torch, and the trainer's parts: once parsed
    from fastcore_ops.training.ablate.report import ablation_report
    from fastcore_ops.training.tradeoff.costing import cost_command
    from fastcore_ops.training.tradeoff.planning import SweepRequest, plan_sweep
    from fastcore_ops.training.tradeoff.sweep import execute_sweep

    if args.cost and (given := sweep_flags_given(args)):
        return cli.refuse(f"--cost prices finished runs; it takes no {', '.join(given)}")
    if not args.cost and (given := cost_only_flags(args)):
        return cli.refuse(f"{given[0]} goes with --cost (the cost pass); leave it out or pass --cost FOLDER...")
    try:
        import_modules(args.imports)
        if args.cost:
            return cost_command(args, baseline=args.recipe, report=ablation_report, tool="ablate")
        arms, shared = ablation_arms(args.recipe, args.methods)
        plan = plan_sweep(SweepRequest(arms, args.budgets, args.seeds, args.data, args.subset, args.device,
                                       [*shared, *args.assignments], args.out, args.recipe, first_seed=args.first_seed,
                                       tool="ablate", progress=not args.no_progress, report=ablation_report,
                                       imports=tuple(args.imports)))
    except cli.REFUSALS as error:
        return cli.refuse(error)
    return execute_sweep(plan)
