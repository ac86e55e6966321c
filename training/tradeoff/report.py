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

from training.tradeoff.analysis import mixed_curves, speedup_table, time_breakdown, verdicts
from training.tradeoff.plots import plot_breakdown, plot_tradeoff
from training.tradeoff.results import RESULTS_CSV, RESULTS_JSON, RunRecord, common_metric, write_results
from training.tradeoff.tables import Table, breakdown_rows, markdown_table, run_rows, speedup_rows, write_csv

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
            f"(other --set values or recipe versions), so their curves mix configurations.</p>")


def _speedups_markdown(records: Sequence[RunRecord], speedup_tab: Table, baseline: str) -> str:
    """The speedup table for a README: one line naming what was measured where, then the table.

    The machine column is dropped when every run shares one machine, which the line names instead.
    """
    metric = common_metric(records)
    machines = sorted({record.machine for record in records})
    recipes = ", ".join(dict.fromkeys(record.recipe for record in records))
    direction = "higher is better" if metric.higher_is_better else "lower is better"
    caption = (f"{len(records)} runs of {recipes} on {', '.join(machines)}; baseline {baseline}; "
               f"{metric.label}, {direction}; training time only (from `speedups.csv`).")
    table = markdown_table(*speedup_tab, drop=["machine"] if len(machines) == 1 else [])
    return f"{caption}\n\n{table}\n"


def build_report(records: Sequence[RunRecord], out: Path, baseline: str, sections: Sequence[str] = ()) -> list[Path]:
    """Write results.{csv,json}, speedups.{csv,md}, breakdown.csv, pareto.png, breakdown.png and report.html to ``out``.

    baseline: the recipe the others are measured against (on each machine separately).
    sections: HTML sections of the caller's own, shown first (the ablation's table of effects).
    Returns the paths written. Raises ValueError, before writing anything, when the records do
    not share one metric.
    """
    if not records:
        raise ValueError("records must hold at least one finished run, got none")
    metric = common_metric(records)
    out.mkdir(parents=True, exist_ok=True)
    write_results(records, out)
    speedups = speedup_table(records, baseline)
    breakdown = time_breakdown(records)
    speedup_tab, breakdown_tab = speedup_rows(speedups, metric), breakdown_rows(breakdown)
    write_csv(out / "speedups.csv", *speedup_tab)
    (out / "speedups.md").write_text(_speedups_markdown(records, speedup_tab, baseline))
    write_csv(out / "breakdown.csv", *breakdown_tab)
    plot_tradeoff(records, out / "pareto.png")
    plot_breakdown(breakdown, out / "breakdown.png")
    machines = sorted({record.machine for record in records})
    label, quantity = html.escape(metric.label), html.escape(metric.quantity)
    direction = "higher is better" if metric.higher_is_better else "lower is better"
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Training tradeoff report: {label}</title><style>{STYLE}</style></head>
<body>
<h1>Quality against training cost: {label}</h1>
<p>{len(records)} runs of {len({r.recipe for r in records})} recipes on {len(machines)} machine(s):
{html.escape(", ".join(machines))}. Baseline: <b>{html.escape(baseline)}</b>. Training time counts the training
steps (waiting for data included) and the methods' own work, never evaluation or checkpointing; the first
epoch's one-off costs are listed apart in the time breakdown. Times from different machines are never compared.
Quality is {label}, {direction}.</p>
{_mixed_warning(records)}
{"".join(sections)}
<h2>Verdicts</h2>
{_verdict_list(verdicts(speedups), baseline)}
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
<h2>Every run</h2>
<p>Also in {RESULTS_CSV} and {RESULTS_JSON} next to this page.</p>
{html_table(run_rows(records, metric))}
</body></html>
"""
    (out / "report.html").write_text(page)
    return [out / name for name in (RESULTS_JSON, RESULTS_CSV, "speedups.csv", "speedups.md", "breakdown.csv",
                                    "pareto.png", "breakdown.png", "report.html")]
