"""The CIFAR-10 frontier with the record's recipes: every run priced by one cost pass, airbench94 beside them.

    PYTHONPATH=. python reports/cifar-record-frontier-20261204/frontier.py reports/cifar-record-frontier-20261204/cost \
        reports/cifar-record-peers-20261204/peers.json --out reports/cifar-record-frontier-20261204

Reads the cost pass's ``results.json`` (each run's modelled training time on the pass's machine) and airbench94's
runs in a ``python -m benchmarks.peers`` sitting (``peers.json``: their measured times, on the same kind of
machine, in another sitting). Writes ``frontier.md`` (per recipe and budget: the runs, their mean time and
top-1, plain and with TTA where the runs report it) and ``frontier.png`` (top-1 against time, plain and with
TTA: each recipe's mean per budget as a curve, each run as a dot, airbench94's runs and mean as stars).
"""

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from matplotlib.ticker import NullFormatter, ScalarFormatter

from fastcore_ops.training.figures import plt, save_figure, series_colors
from fastcore_ops.training.tradeoff.results import RunRecord, read_results

PANELS = (("top1", "plain (one view of each test image)"), ("top1_tta", "with test-time augmentation"))


def airbench_runs(path: Path) -> list[dict]:
    """airbench94's rows of a peers.json: ``train_seconds``, ``top1``, ``top1_tta``; ValueError naming the file."""
    try:
        runs = json.loads(path.read_text())["runs"]
        chosen = [{key: float(run[key]) for key in ("train_seconds", "top1", "top1_tta")}
                  for run in runs if run["trainer"] == "airbench"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{path}: not a peers.json with airbench runs ({error})") from None
    if not chosen:
        raise ValueError(f"{path}: no airbench run in it")
    return chosen


def by_budget(records: list[RunRecord]) -> dict[str, dict[float, list[RunRecord]]]:
    """The finished runs by recipe (in their order in ``records``), then by budget, then by seed."""
    grouped: dict[str, dict[float, list[RunRecord]]] = defaultdict(lambda: defaultdict(list))
    for record in records:
        grouped[record.recipe][record.budget].append(record)
    return {recipe: {budget: sorted(runs, key=lambda run: run.seed) for budget, runs in sorted(budgets.items())}
            for recipe, budgets in grouped.items()}


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def table(grouped, airbench: list[dict]) -> str:
    """frontier.md: the machine the runs were priced on, then a row per recipe and budget, then airbench94's."""
    machines = sorted({run.machine for budgets in grouped.values() for runs in budgets.values() for run in runs})
    lines = [f"Our runs priced on {', '.join(machines)}; airbench94's times measured, in the sitting of its peers.json.",
             "", "| recipe | budget | runs | mean time (s) | top-1 (%) | with TTA (%) |", "|---|---|---|---|---|---|"]

    def cell(value):
        return "" if value is None else f"{100 * value:.2f}"

    for recipe, budgets in grouped.items():
        for budget, runs in budgets.items():
            tta = [run.metrics["top1_tta"] for run in runs if "top1_tta" in run.metrics]
            lines.append(f"| {recipe} | x{budget:g} | {len(runs)} | {_mean([r.train_seconds for r in runs]):.1f} | "
                         f"{cell(_mean([r.metrics['top1'] for r in runs]))} | "
                         f"{cell(_mean(tta) if len(tta) == len(runs) else None)} |")
    lines.append(f"| airbench94 (measured) | x1 | {len(airbench)} | "
                 f"{_mean([run['train_seconds'] for run in airbench]):.1f} | "
                 f"{cell(_mean([run['top1'] for run in airbench]))} | {cell(_mean([run['top1_tta'] for run in airbench]))} |")
    return "\n".join(lines) + "\n"


def figure(grouped, airbench: list[dict], path: Path) -> None:
    """frontier.png: the two panels of PANELS side by side, time on a log axis."""
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.5), sharex=True, sharey=True)
    colors = dict(zip(grouped, series_colors(len(grouped))))
    for ax, (metric, title) in zip(axes, PANELS):
        for recipe, budgets in grouped.items():
            points = []
            for runs in budgets.values():
                judged = [run for run in runs if metric in run.metrics]
                if len(judged) != len(runs):
                    continue  # a budget some of whose runs lack the metric: no mean to draw
                ax.scatter([r.train_seconds for r in runs], [100 * r.metrics[metric] for r in runs], s=12,
                           color=colors[recipe], alpha=0.35)
                points.append((_mean([r.train_seconds for r in runs]), 100 * _mean([r.metrics[metric] for r in runs])))
            if points:
                ax.plot(*zip(*points), marker="o", color=colors[recipe], label=recipe)
        ax.scatter([run["train_seconds"] for run in airbench], [100 * run[metric] for run in airbench], marker="*",
                   s=60, color="black", alpha=0.35)
        ax.scatter([_mean([run["train_seconds"] for run in airbench])], [100 * _mean([run[metric] for run in airbench])],
                   marker="*", s=220, color="black", label="airbench94 (measured, another sitting)")
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("training time (s, modelled by the cost pass; airbench94 measured)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("top-1 on the 10,000 test images (%)")
    axes[0].legend(loc="lower right", fontsize=8)
    save_figure(fig, path, tight=True)


def main(argv: list[str] | None = None) -> int:
    """Write frontier.md and frontier.png; 2 with one ``error:`` line, nothing written, when an input cannot be read."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("priced", type=Path, help="the cost pass's output folder (its results.json)")
    parser.add_argument("peers", type=Path, help="the peers.json of a benchmarks.peers sitting against airbench94")
    parser.add_argument("--out", type=Path, required=True, help="an existing folder for frontier.md and .png")
    args = parser.parse_args(argv)
    try:
        records = [run for run in read_results(args.priced) if isinstance(run, RunRecord)]
        if not records:
            raise ValueError(f"{args.priced}: no finished run in its results.json")
        airbench = airbench_runs(args.peers)
        if not args.out.is_dir():
            raise ValueError(f"--out {args.out}: not a folder; pass an existing one")
    except (ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    grouped = by_budget(records)
    (args.out / "frontier.md").write_text(table(grouped, airbench))
    figure(grouped, airbench, args.out / "frontier.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
