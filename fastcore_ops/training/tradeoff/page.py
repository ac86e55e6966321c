"""The report's one self-contained HTML page: the findings in words, the figures embedded, every run listed.

    >>> from fastcore_ops.training.tradeoff.tables import write_tables
    >>> table = RunTable.of(records)
    >>> write_page(table, None, write_tables(table, None, out), out, "cifar_baseline").name
    'report.html'
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from pathlib import Path

from fastcore_ops.training.tradeoff.analysis import BaselineGap, Findings
from fastcore_ops.training.tradeoff.plots import BREAKDOWN_PNG, PARETO_PNG
from fastcore_ops.training.tradeoff.results import LEFT_OUT, RESULTS_CSV, RESULTS_JSON, FailedRun
from fastcore_ops.training.tradeoff.run_table import CurveKey, RunTable
from fastcore_ops.training.tradeoff.tables import ReportText, Table

REPORT_HTML = "report.html"

STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; color: #222; }
table { border-collapse: collapse; font-size: 0.85em; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: right; }
th { background: #f0f0f0; } td:nth-child(-n+2) { text-align: left; }
img { max-width: 100%; } .no { color: #a00; font-weight: bold; } .yes { color: #070; font-weight: bold; }
"""


def html_table(table: Table) -> str:
    """A table as HTML, every cell escaped.

        >>> html_table((["a"], [["<b>"]]))
        '<table><thead><tr><th>a</th></tr></thead><tbody><tr><td>&lt;b&gt;</td></tr></tbody></table>'
    """
    header, rows = table
    head = "".join(f"<th>{html.escape(cell)}</th>" for cell in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def embedded_image(path: Path, alt: str) -> str:
    """An <img> holding the PNG at ``path`` itself, so the page needs no file beside it."""
    encoded = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{encoded}">'


def _verdict_list(sentences: dict[CurveKey, str], baseline: str) -> str:
    if not sentences:
        return f"<p>No recipe to compare with the baseline <b>{html.escape(baseline)}</b> on the same machine.</p>"
    items = []
    for (machine, recipe), sentence in sentences.items():
        css = "no" if sentence.startswith("does not") else "yes"
        items.append(f'<li><b>{html.escape(recipe)}</b> on {html.escape(machine)}: '
                     f'<span class="{css}">{html.escape(sentence)}</span></li>')
    return "<ul>" + "".join(items) + "</ul>"


def _mixed_warning(mixed: Sequence[CurveKey]) -> str:
    if not mixed:
        return ""
    names = ", ".join(f"{recipe} on {machine}" for machine, recipe in mixed)
    return (f'<p class="no">Warning: the runs of {html.escape(names)} differ in more than seed and budget '
            f"(other --set values, recipe versions or precisions), so their curves mix configurations.</p>")


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


def _findings_section(table: RunTable, findings: Findings, text: ReportText, out: Path) -> str:
    """The findings' sections: verdicts, the tradeoff curves, the speedups and where the time goes."""
    metric = table.metric
    label, quantity = html.escape(metric.label), html.escape(metric.quantity)
    return f"""<h2>Verdicts</h2>
{_verdict_list(text.verdicts, findings.baseline)}
{_gap_notes(findings.gaps)}
<h2>Tradeoff curves: {label} against training time</h2>
<p>Each point is one budget (scale-schedule ratio): the mean over seeds, with error bars for the spread
(± one standard deviation from 3 or more seeds, min to max from 2). Circled points form the Pareto
frontier: no other point is both faster and at least as good.</p>
{embedded_image(out / PARETO_PNG, f"{metric.label} against training time per recipe")}
<h2>Speedup over the baseline at equal {quantity}</h2>
<p>For each baseline budget: the time each recipe needs to reach the baseline's {quantity}, interpolated linearly in
time between its neighbouring budgets (never extrapolated: "≥" marks a recipe whose cheapest budget already
reaches the target, so its true speedup is at least that), the ratio of the baseline's time to it, that ratio
over the recipe's seeds (mean ± standard deviation, or min-max with 2 seeds), and how much better the recipe's
{quantity} is than the baseline's at the baseline's time.</p>
{html_table(text.speedups)}
<h2>Where the time goes</h2>
<p>Milliseconds per training step by phase, summed over each recipe's runs. A method can only speed up the
phase it changes (Amdahl's law): the largest phase is the one worth attacking next.</p>
{embedded_image(out / BREAKDOWN_PNG, "time per training step by phase")}
{html_table(text.breakdown)}
"""


def _intro(table: RunTable, baseline: str) -> str:
    records, metric = table.records, table.metric
    machines = sorted({run.machine for run in (*records, *table.left_out)})
    quality = "No run finished with a usable result, so there is no curve to draw." if metric is None else (
        f"Quality is {html.escape(metric.label)}, {'higher' if metric.higher_is_better else 'lower'} is better.")
    recipes = len({record.recipe for record in records})
    return f"""<p>{len(records)} usable runs of {recipes} recipes on {len(machines)} machine(s):
{html.escape(", ".join(machines))}. Baseline: <b>{html.escape(baseline)}</b>. Training time counts the training
steps (waiting for data included) and the methods' own work, never evaluation or checkpointing; the first
epoch's one-off costs are listed apart in the time breakdown. Times from different machines are never compared.
{quality}</p>"""


def write_page(table: RunTable, findings: Findings | None, text: ReportText, out: Path, baseline: str,
               sections: Sequence[str] = ()) -> Path:
    """Write report.html to ``out``, with the caller's own HTML ``sections`` first; the figures must be in ``out``
    already (with findings). Returns its path."""
    metric = table.metric
    title = html.escape(metric.label if metric else "no usable run")
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Training tradeoff report: {title}</title>
<style>{STYLE}</style></head>
<body>
<h1>Quality against training cost: {title}</h1>
{_intro(table, baseline)}
{_left_out_summary(table.left_out)}
{_mixed_warning(findings.mixed if findings else [])}
{"".join(sections)}
{_findings_section(table, findings, text, out) if findings else ""}
<h2>Every run</h2>
<p>Also in {RESULTS_CSV} and {RESULTS_JSON} next to this page, each with its status.</p>
{html_table(text.runs)}
</body></html>
"""
    (out / REPORT_HTML).write_text(page)
    return out / REPORT_HTML
