"""Build every output of the tradeoff tool from run records: tables, figures and one self-contained HTML page.

    >>> outputs = build_report(records, out, baseline="cifar_baseline")
    >>> sorted(path.name for path in outputs)
    ['breakdown.csv', 'breakdown.png', 'pareto.png', 'report.html', 'results.csv', 'results.json', 'speedups.csv',
     'speedups.md']
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from pathlib import Path

from fastcore_ops.training.tradeoff.analysis import (BaselineGap, baseline_gaps, mixed_curves, speedup_table,
                                                     time_breakdown, verdicts)
from fastcore_ops.training.tradeoff.metric import Metric
from fastcore_ops.training.tradeoff.plots import plot_breakdown, plot_tradeoff
from fastcore_ops.training.tradeoff.results import (LEFT_OUT, RESULTS_CSV, RESULTS_JSON, FailedRun, Run, RunRecord,
                                                    common_metric, judge, split_runs, write_results)
from fastcore_ops.training.tradeoff.tables import (Table, breakdown_rows, markdown_table, run_rows, speedup_rows,
                                                   write_csv)

STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; color: #222; }
table { border-collapse: collapse; font-size: 0.85em; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: right; }
th { background: #f0f0f0; } td:nth-child(-n+2) { text-align: left; }
img { max-width: 100%; } .no { color: #a00; font-weight: bold; } .yes { color: #070; font-weight: bold; }
"""


def html_table(table: Table) -> str:
    """A table as HTML, every cell escaped."""
    header, rows = table
    head = "".join(f"<th>{html.escape(cell)}</th>" for cell in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def embedded_image(path: Path, alt: str) -> str:
    """An <img> holding the PNG at ``path`` itself, so the page needs no file beside it."""
    encoded = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{encoded}">'


def _verdict_list(sentences: dict[tuple[str, str], str], baseline: str) -> str:
    if not sentences:
        return f"<p>No recipe to compare with the baseline <b>{html.escape(baseline)}</b> on the same machine.</p>"
    items = []
    for (machine, recipe), sentence in sentences.items():
        css = "no" if sentence.startswith("does not") else "yes"
        items.append(f'<li><b>{html.escape(recipe)}</b> on {html.escape(machine)}: '
                     f'<span class="{css}">{html.escape(sentence)}</span></li>')
    return "<ul>" + "".join(items) + "</ul>"


def _mixed_warning(records: Sequence[RunRecord]) -> str:
    mixed = mixed_curves(records)
    if not mixed:
        return ""
    names = ", ".join(f"{recipe} on {machine}" for machine, recipe in mixed)
    return (f'<p class="no">Warning: the runs of {html.escape(names)} differ in more than seed and budget '
            f"(other --set values, recipe versions or precisions), so their curves mix configurations.</p>")


def _speedups_markdown(records: Sequence[RunRecord], left_out: Sequence[FailedRun], speedup_tab: Table,
                       baseline: str) -> str:
    """The speedup table for a README: one line naming what was measured where, then the table.

    The machine column is dropped when every run shares one machine, which the line names instead.
    """
    metric = common_metric(records)
    machines = sorted({record.machine for record in records})
    recipes = ", ".join(dict.fromkeys(record.recipe for record in records))
    direction = "higher is better" if metric.higher_is_better else "lower is better"
    dropped = f" ({len(left_out)} more diverged or failed: see `results.csv`)" if left_out else ""
    caption = (f"{len(records)} runs{dropped} of {recipes} on {', '.join(machines)}; baseline {baseline}; "
               f"{metric.label}, {direction}; training time only (from `speedups.csv`).")
    table = markdown_table(*speedup_tab, drop=["machine"] if len(machines) == 1 else [])
    return f"{caption}\n\n{table}\n"


def _left_out_summary(left_out: Sequence[FailedRun]) -> str:
    if not left_out:
        return ""
    counts = ", ".join(f"{sum(run.status == status for run in left_out)} {status}" for status in LEFT_OUT
                       if any(run.status == status for run in left_out))
    names = ", ".join(run.label for run in left_out)
    return (f'<p class="no">{len(left_out)} run(s) left out of the curves, speedups and figures ({counts}): '
            f"{html.escape(names)}. Each is listed under Every run with why and the path of its log.</p>")


def _gap_notes(gaps: Sequence[BaselineGap]) -> str:
    return "".join(f'<p class="no">On {html.escape(gap.machine)}: {html.escape(gap.describe())}.</p>' for gap in gaps)


def _analysis(records: Sequence[RunRecord], left_out: Sequence[FailedRun], out: Path, baseline: str,
              metric: Metric) -> tuple[str, list[Path]]:
    """The tables and figures of the usable ``records`` written to ``out``: (their HTML, the files written)."""
    speedups, gaps = speedup_table(records, baseline), baseline_gaps(records, left_out, baseline)
    breakdown = time_breakdown(records)
    speedup_tab, breakdown_tab = speedup_rows(speedups, metric, gaps), breakdown_rows(breakdown)
    write_csv(out / "speedups.csv", *speedup_tab)
    (out / "speedups.md").write_text(_speedups_markdown(records, left_out, speedup_tab, baseline))
    write_csv(out / "breakdown.csv", *breakdown_tab)
    plot_tradeoff(records, out / "pareto.png")
    plot_breakdown(breakdown, out / "breakdown.png")
    label, quantity = html.escape(metric.label), html.escape(metric.quantity)
    page = f"""<h2>Verdicts</h2>
{_verdict_list(verdicts(speedups), baseline)}
{_gap_notes(gaps)}
<h2>Tradeoff curves: {label} against training time</h2>
<p>Each point is one budget (scale-schedule ratio): the mean over seeds, with error bars for the spread
(± one standard deviation from 3 or more seeds, min to max from 2). Circled points form the Pareto
frontier: no other point is both faster and at least as good.</p>
{embedded_image(out / "pareto.png", f"{metric.label} against training time per recipe")}
<h2>Speedup over the baseline at equal {quantity}</h2>
<p>For each baseline budget: the time each recipe needs to reach the baseline's {quantity}, interpolated linearly in
time between its neighbouring budgets (never extrapolated: "≥" marks a recipe whose cheapest budget already
reaches the target, so its true speedup is at least that), the ratio of the baseline's time to it, that ratio
over the recipe's seeds (mean ± standard deviation, or min-max with 2 seeds), and how much better the recipe's
{quantity} is than the baseline's at the baseline's time.</p>
{html_table(speedup_tab)}
<h2>Where the time goes</h2>
<p>Milliseconds per training step by phase, summed over each recipe's runs. A method can only speed up the
phase it changes (Amdahl's law): the largest phase is the one worth attacking next.</p>
{embedded_image(out / "breakdown.png", "time per training step by phase")}
{html_table(breakdown_tab)}
"""
    return page, [out / name for name in ("speedups.csv", "speedups.md", "breakdown.csv", "pareto.png",
                                          "breakdown.png")]


def _intro(records: Sequence[RunRecord], left_out: Sequence[FailedRun], baseline: str, metric: Metric | None) -> str:
    machines = sorted({run.machine for run in (*records, *left_out)})
    quality = "No run finished with a usable result, so there is no curve to draw." if metric is None else (
        f"Quality is {html.escape(metric.label)}, {'higher' if metric.higher_is_better else 'lower'} is better.")
    recipes = len({record.recipe for record in records})
    return f"""<p>{len(records)} usable runs of {recipes} recipes on {len(machines)} machine(s):
{html.escape(", ".join(machines))}. Baseline: <b>{html.escape(baseline)}</b>. Training time counts the training
steps (waiting for data included) and the methods' own work, never evaluation or checkpointing; the first
epoch's one-off costs are listed apart in the time breakdown. Times from different machines are never compared.
{quality}</p>"""


def build_report(runs: Sequence[Run], out: Path, baseline: str, sections: Sequence[str] = ()) -> list[Path]:
    """Write results.{csv,json}, speedups.{csv,md}, breakdown.csv, pareto.png, breakdown.png and report.html to ``out``.

    runs: finished runs and runs left out (FailedRun, or records that diverged: see ``judge``). Every run
        is listed with its status; the curves, speedups and figures hold the usable ones, and with none
        usable only results.{csv,json} and report.html are written.
    baseline: the recipe the others are measured against (on each machine separately).
    sections: HTML sections of the caller's own, shown first (the ablation's table of effects).
    Returns the paths written. Raises ValueError, before writing anything, when the usable runs do
    not share one metric.
    """
    if not runs:
        raise ValueError("runs must hold at least one run, got none")
    runs = [judge(run) for run in runs]
    records, left_out = split_runs(runs)
    metric = common_metric(records) if records else None
    out.mkdir(parents=True, exist_ok=True)
    write_results(runs, out)
    analysis, files = _analysis(records, left_out, out, baseline, metric) if records else ("", [])
    title = html.escape(metric.label if metric else "no usable run")
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Training tradeoff report: {title}</title>
<style>{STYLE}</style></head>
<body>
<h1>Quality against training cost: {title}</h1>
{_intro(records, left_out, baseline, metric)}
{_left_out_summary(left_out)}
{_mixed_warning(records)}
{"".join(sections)}
{analysis}
<h2>Every run</h2>
<p>Also in {RESULTS_CSV} and {RESULTS_JSON} next to this page, each with its status.</p>
{html_table(run_rows(runs, metric))}
</body></html>
"""
    (out / "report.html").write_text(page)
    return [out / RESULTS_JSON, out / RESULTS_CSV, *files, out / "report.html"]
