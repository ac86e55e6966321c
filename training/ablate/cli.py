"""``python -m training.ablate``: what each method is worth on its own, against a base recipe.

    python -m training.ablate --base cifar_baseline_small --methods all --seeds 2 \\
        --data ../shared/datasets/cifar10-jpeg --subset 500 --out reports/ablation

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
Exit codes as the tradeoff tool's: 0 done, 1 a run failed, 2 bad input (one ``error:`` line,
nothing written), 128+signal when stopped.
"""

from __future__ import annotations

import argparse
import html
from pathlib import Path

from fastcore_ops import cli
from fastcore_ops.cli import refuse
from training.ablate.catalog import METHODS
from training.ablate.effects import effect_rows, method_effects, plot_effects, runs_left_out, tta_sentence
from training.config import TrainConfig
from training.plugins import add_import_option, import_modules
from training.recipes import get_recipe, list_recipes
from training.tradeoff.analysis import speedup_table
from training.tasks.registry import task_named
from training.tradeoff.runner import SweepRequest, parse_budgets, sweep
from training.tradeoff.report import build_report, embedded_image, html_table
from training.tradeoff.results import Run, common_metric, split_runs
from training.tradeoff.sweep import Variant
from training.tradeoff.tables import markdown_table, write_csv


def build_parser() -> cli.ArgumentParser:
    """The command line of ``python -m training.ablate``."""
    parser = cli.ArgumentParser(prog="python -m training.ablate", description=cli.description(__doc__))
    parser.add_argument("--base", required=True,
                        help=f"the recipe every variant changes; known: {', '.join(list_recipes())}")
    parser.add_argument("--methods", default="all",
                        help=f"comma-separated methods, or 'all' (those that apply to the base's task); known: "
                             f"{', '.join(METHODS)}")
    parser.add_argument("--budgets", default="1", help="comma-separated scale-schedule ratios; two or more give each "
                                                       "variant a curve and a speedup")
    parser.add_argument("--seeds", type=int, default=2, help="seeds per variant and budget: 0 to N-1")
    parser.add_argument("--data", type=Path, help="image classification: folder with train/ and val/ (or test/)")
    parser.add_argument("--subset", type=int, help="train on the first N images of each class")
    parser.add_argument("--out", type=Path, required=True, help="report folder; the runs go to OUT/runs/")
    cli.add_device_option(parser)
    parser.add_argument("--set", dest="assignments", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                        help="configuration override for every run, base included; repeatable")
    cli.add_no_progress_option(parser)
    add_import_option(parser)
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def parse_methods(text: str, base: TrainConfig) -> list[str]:
    """The method names in a comma-separated list ("all": every method of the catalog that applies to
    ``base``'s task), each once; ValueError for a method that does not apply.

    Example:
        >>> parse_methods("cutout, mixup", get_recipe("cifar_baseline"))
        ['cutout', 'mixup']
        >>> parse_methods("all", get_recipe("gpt_alibi"))
        ['alibi', 'low_precision_norm', 'sam', 'layer_freezing', 'ema', 'swa', 'seq_length_warmup', 'selective_backprop']
    """
    if text.strip() == "all":
        return [name for name, switch in METHODS.items() if switch.applies_to(base)]
    names = cli.check_names("--methods", text, METHODS, "method")
    for name in names:
        if not METHODS[name].applies_to(base):
            raise ValueError(f"--methods: {METHODS[name].method.mismatch(task_named(base.task))} (the base's task); "
                             f"leave it out")
    return names


def variants(base: str, config: TrainConfig, methods: list[str]) -> list[Variant]:
    """The base, then for each method the base with it added ("base+name") or removed ("base-name").

    Example:
        >>> [v.name for v in variants("cifar_medium", get_recipe("cifar_medium"), ["cutout", "ema"])]
        ['cifar_medium', 'cifar_medium+cutout', 'cifar_medium-ema']
    """
    arms = [Variant.of(base)]
    for name in methods:
        change, assignments = METHODS[name].toggle(config)
        arms.append(Variant(f"{base}{'+' if change == 'added' else '-'}{name}", base, assignments))
    return arms


def ablation_report(runs: list[Run], out: Path, base: str) -> list[Path]:
    """``ablation.{csv,md,png}`` (each method's effect), then the tradeoff report of every variant with them on top.

    Runs that diverged or failed are left out of the effects and named beside them; with no usable
    run at all there is no effect to measure, and only the tradeoff report's run list is written.
    """
    records, _ = split_runs(runs)
    if not records:
        section = "<h2>Each method alone</h2><p>No run finished with a usable result: no effect to measure.</p>"
        return build_report(runs, out, base, sections=[section])
    out.mkdir(parents=True, exist_ok=True)
    metric = common_metric(records)
    budget = 1.0 if any(r.budget == 1.0 for r in runs) else max(r.budget for r in runs)
    effects = method_effects(records, base, budget, speedup_table(records, base))
    table = effect_rows(effects, metric, runs_left_out(runs, base, budget))
    write_csv(out / "ablation.csv", *table)
    machines = ", ".join(sorted({r.machine for r in records}))
    caption = (f"Each method alone against {base} at budget x{budget:g} on {machines}: {metric.label}, change per "
               f"seed (from `ablation.csv`; runs that diverged or failed are left out and named). "
               f"{tta_sentence(records, base, budget)}").strip()
    (out / "ablation.md").write_text(f"{caption}\n\n{markdown_table(*table, drop=['machine'])}\n")
    plot_effects(effects, metric, out / "ablation.png")
    section = (f"<h2>Each method alone</h2><p>{html.escape(caption)}</p>"
               f"{embedded_image(out / 'ablation.png', 'quality change against step-time change per method')}"
               f"{html_table(table)}")
    written = build_report(runs, out, base, sections=[section])
    return [out / "ablation.csv", out / "ablation.md", out / "ablation.png", *written]


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns its exit code."""
    try:
        args = parse_args(argv)
        import_modules(args.imports)
        base_config = get_recipe(cli.check_name("--base", args.base, list_recipes(), "recipe"))
        budgets, methods = parse_budgets(args.budgets), parse_methods(args.methods, base_config)
    except ValueError as error:
        return refuse(error)
    shared = [*task_named(base_config.task).ablation_assignments, *args.assignments]
    return sweep(SweepRequest(variants(args.base, base_config, methods), budgets, args.seeds, args.data, args.subset,
                              args.device, shared, args.out, args.base, tool="ablate", progress=not args.no_progress,
                              report=ablation_report, imports=tuple(args.imports)))
