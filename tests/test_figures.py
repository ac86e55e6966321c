"""Every figure the tools write is legible: no two labels overlap, a colour per series, readable axes.

Each figure is drawn from the committed reports' own results, the crowded ones included (the
ablation's 18 variants), at the size its tool writes it.
"""

import json
from pathlib import Path

import pytest

from benchmarks.peers import peers_figure
from fastcore_ops.training.ablate.effects import effects_figure, method_effects
from fastcore_ops.training.figures import label_points, overlapping_labels, plt, series_colors
from fastcore_ops.training.metrics import curves_figure
from fastcore_ops.training.tradeoff.analysis import analyse, time_breakdown
from fastcore_ops.training.tradeoff.plots import breakdown_figure, tradeoff_figure
from fastcore_ops.training.tradeoff.results import common_metric, read_results, split_runs
from fastcore_ops.training.tradeoff.run_table import RunTable

REPORTS = Path(__file__).resolve().parent.parent / "reports"
SWEEPS = ["cifar-full-tradeoff-20261127", "cifar-tradeoff-openmp-20261125", "gpt-heldout-20261126",
          "ablation-cifar-flips-20261124"]


def records_of(report: str):
    return split_runs(read_results(REPORTS / report))[0]


@pytest.fixture
def drawn():
    """Closes every figure a test draws."""
    figures = []
    yield lambda figure: figures.append(figure) or figure
    for figure in figures:
        plt.close(figure)


def test_the_ablation_labels_every_variant_apart_in_a_colour_of_its_own(drawn):
    records = records_of("ablation-cifar-flips-20261124")
    effects = method_effects(records, "cifar_baseline", 0.5)
    figure = drawn(effects_figure(effects, common_metric(records)))
    assert len(effects) == 18
    assert overlapping_labels(figure) == []
    labels = {text.get_text() for text in figure.axes[0].texts}
    assert {effect.label for effect in effects} <= labels
    colors = {tuple(line.get_color()) for line in figure.axes[0].lines if line.get_marker() == "o"}
    assert len(colors) == 18


@pytest.mark.parametrize("report", SWEEPS)
def test_a_tradeoff_plot_has_no_overlapping_labels_and_at_least_four_time_ticks(drawn, report):
    table = RunTable.of(records_of(report))
    figure = drawn(tradeoff_figure(table, analyse(table, table.records[0].recipe).frontier))
    assert overlapping_labels(figure) == []
    for axes in figure.axes:
        low, high = axes.get_xlim()
        shown = [tick for tick in axes.get_xticks() if low <= tick <= high]
        assert len(shown) >= 4, f"{report}: the time axis names only {shown}"


@pytest.mark.parametrize("report", SWEEPS)
def test_a_breakdown_has_no_overlapping_labels(drawn, report):
    assert overlapping_labels(drawn(breakdown_figure(time_breakdown(RunTable.of(records_of(report)))))) == []


@pytest.mark.parametrize("report", ["peers-cifar-full-20261127", "peers-cifar-full-rerun-20261127"])
def test_the_peers_plot_names_the_floors_in_its_legend_not_over_a_bar(drawn, report):
    measured = json.loads((REPORTS / report / "peers.json").read_text())
    figure = drawn(peers_figure(measured["runs"], measured["floor"], "cifar_mild: ours against Composer"))
    assert overlapping_labels(figure) == []
    legend = [text.get_text() for text in figure.axes[0].get_legend().get_texts()]
    assert "floor: forward + backward alone, fastest steps" in legend


def test_a_one_evaluation_run_is_drawn_in_seconds_from_zero(drawn):
    row = {"step": 195, "train_seconds": 42.0, "top1": 0.5, "train_loss": 1.4, "eval_loss": 1.5}
    figure = drawn(curves_figure([row], "top1", "top-1 (%)"))
    metric_axes = figure.axes[0]
    assert metric_axes.get_xlabel() == "training time (s)"
    assert metric_axes.get_xlim() == pytest.approx((0.0, 46.2))
    assert overlapping_labels(figure) == []


def test_a_long_run_is_drawn_in_minutes(drawn):
    rows = [{"step": s, "train_seconds": 60.0 * s, "top1": 0.5, "train_loss": 1.4, "eval_loss": 1.5}
            for s in (1, 2, 3)]
    assert drawn(curves_figure(rows, "top1", "top-1 (%)")).axes[0].get_xlabel() == "training time (min)"


def test_labels_on_one_crowded_spot_are_all_readable(drawn):
    figure, axes = plt.subplots(figsize=(6, 4))
    drawn(figure)
    points = [(1.0 + 0.01 * index, 1.0) for index in range(8)] + [(0.0, 0.0), (2.0, 2.0)]
    axes.plot(*zip(*points), "o")
    figure.tight_layout()
    label_points(axes, points, [f"variant number {index}" for index in range(len(points))])
    assert overlapping_labels(figure) == []


def test_overlapping_labels_finds_two_texts_on_one_spot(drawn):
    figure, axes = plt.subplots()
    drawn(figure)
    axes.text(0.5, 0.5, "first label")
    axes.text(0.52, 0.5, "second label")
    assert overlapping_labels(figure) == [("first label", "second label")]


def test_series_colors_are_distinct_and_dark_enough_for_text():
    for count in (3, 10, 18, 30):
        colors = series_colors(count)
        assert len(set(colors)) == count
        assert all(sum(color) < 2.4 for color in colors)
