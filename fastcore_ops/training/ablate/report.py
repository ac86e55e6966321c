"""An ablation's report: each method's effect (``ablation.csv``/``.md``/``.png``) on top of the tradeoff report.

    >>> written = ablation_report(records, out, "cifar_baseline")
    >>> [path.name for path in written[:3]]
    ['ablation.csv', 'ablation.md', 'ablation.png']
"""

from __future__ import annotations

import html
from pathlib import Path

from fastcore_ops.training.ablate.effects import (added_metric_sentences, effect_rows, method_effects, plot_effects,
                                                   runs_left_out)
from fastcore_ops.training.recipes import get_recipe
from fastcore_ops.training.tasks.registry import task_named
from fastcore_ops.training.tradeoff.analysis import speedup_table
from fastcore_ops.training.tradeoff.page import embedded_image, html_table
from fastcore_ops.training.tradeoff.report import build_report
from fastcore_ops.training.tradeoff.results import Run, common_metric, split_runs
from fastcore_ops.training.tradeoff.run_table import RunTable
from fastcore_ops.training.tradeoff.tables import markdown_table, write_csv


def ablation_report(runs: list[Run], out: Path, base: str, task: type | None = None) -> list[Path]:
    """``ablation.{csv,md,png}`` (each method's effect), then the tradeoff report of every variant with them on top.

    task: the base's task class, whose ``ablation_metrics`` the caption reports; None: the ``base`` recipe's.

    Runs that diverged or failed are left out of the effects and named beside them; with no usable
    run at all there is no effect to measure, and only the tradeoff report's run list is written.
    """
    records, _ = split_runs(runs)
    if not records:
        section = "<h2>Each method alone</h2><p>No run finished with a usable result: no effect to measure.</p>"
        return build_report(runs, out, base, sections=[section])
    out.mkdir(parents=True, exist_ok=True)
    task = task or task_named(get_recipe(base).task)
    metric = common_metric(records)
    budget = 1.0 if any(r.budget == 1.0 for r in runs) else max(r.budget for r in runs)
    effects = method_effects(records, base, budget, speedup_table(RunTable.of(records), base),
                             added=list(task.ablation_metrics))
    table = effect_rows(effects, metric, runs_left_out(runs, base, budget), task.ablation_metrics)
    write_csv(out / "ablation.csv", *table)
    machines = ", ".join(sorted({r.machine for r in records}))
    caption = (f"Each method alone against {base} at budget x{budget:g} on {machines}: {metric.label}, change per "
               f"seed (from `ablation.csv`; runs that diverged or failed are left out and named). "
               f"{added_metric_sentences(records, base, budget, task.ablation_metrics)}").strip()
    (out / "ablation.md").write_text(f"{caption}\n\n{markdown_table(*table, drop=['machine'])}\n")
    plot_effects(effects, metric, out / "ablation.png")
    section = (f"<h2>Each method alone</h2><p>{html.escape(caption)}</p>"
               f"{embedded_image(out / 'ablation.png', 'quality change against step-time change per method')}"
               f"{html_table(table)}")
    written = build_report(runs, out, base, sections=[section])
    return [out / "ablation.csv", out / "ablation.md", out / "ablation.png", *written]
