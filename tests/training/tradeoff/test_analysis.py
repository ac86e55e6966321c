"""Speedups, accuracy at equal time, verdicts and the time breakdown, against hand-computed curves."""

import dataclasses
import statistics

import pytest

from training.tradeoff.analysis import Spread, mixed_curves, speedup_table, time_breakdown, verdicts
from training.tradeoff.results import RunRecord
from training.tradeoff.tables import describe_speedup, speedup_rows


def record(recipe, budget, seed, seconds, top1, machine="m1", phases=None, steps=10, first=None):
    return RunRecord(machine=machine, recipe=recipe, budget=budget, seed=seed, top1=top1, eval_loss=1.0,
                     train_seconds=seconds, first_epoch_seconds=seconds if first is None else first,
                     images_per_second=100.0, steps=steps, config_hash="abc", phase_seconds=phases or {})


BASE = [record("base", 1.0, s, 10.0, a) for s, a in enumerate((0.60, 0.62, 0.64))] + \
       [record("base", 2.0, s, 20.0, 0.70) for s in range(3)]
FAST = [record("fast", 0.5, s, 4.0, a) for s, a in enumerate((0.58, 0.60, 0.62))] + \
       [record("fast", 1.0, s, 8.0, a) for s, a in enumerate((0.70, 0.72, 0.74))]
SLOW = [record("slow", 1.0, 0, 15.0, 0.55), record("slow", 2.0, 0, 30.0, 0.65)]
# A second machine, ten times slower: if its times leaked into m1's curves, m1's numbers would move.
OTHER = [record("base", 1.0, 0, 100.0, 0.62, machine="m2"), record("fast", 1.0, 0, 50.0, 0.62, machine="m2")]


@pytest.fixture(scope="module")
def rows():
    table = speedup_table(BASE + FAST + SLOW + OTHER, baseline="base")
    return {(row.machine, row.recipe, row.baseline_budget): row for row in table}


def test_only_non_baseline_recipes_at_each_baseline_budget_per_machine(rows):
    assert sorted(rows) == [("m1", "fast", 1.0), ("m1", "fast", 2.0), ("m1", "slow", 1.0), ("m1", "slow", 2.0),
                            ("m2", "fast", 1.0)]


def test_speedup_to_the_baseline_accuracy_is_interpolated_along_the_mean_curve(rows):
    # fast's mean curve: (4 s, 60%), (8 s, 72%). Baseline x1: 10 s for 62% (mean of 60, 62, 64).
    row = rows[("m1", "fast", 1.0)]
    assert row.target_top1 == pytest.approx(0.62) and row.baseline_seconds == pytest.approx(10.0)
    assert row.recipe_seconds == pytest.approx(4 + 4 * 0.02 / 0.12)
    assert row.speedup == pytest.approx(10 / (4 + 4 * 0.02 / 0.12))
    assert not row.at_most
    # Baseline x2: 20 s for 70%; fast gets there at 4 + 4 * 10/12 s.
    assert rows[("m1", "fast", 2.0)].speedup == pytest.approx(20 / (4 + 4 * 0.10 / 0.12))


def test_seed_spread_comes_from_each_seed_curve_against_the_baseline_mean(rows):
    row = rows[("m1", "fast", 1.0)]
    # Seed 0: (4, 58%) -> (8, 70%) reaches 62% at 4 + 4 * 4/12; seed 1 as the mean; seed 2 starts at 62%.
    expected = [10 / (4 + 4 * 0.04 / 0.12), 10 / (4 + 4 * 0.02 / 0.12), 10 / 4]
    assert row.seed_speedups == pytest.approx(expected)
    assert row.spread.mean == pytest.approx(statistics.fmean(expected))
    low, high = row.spread.low_high
    assert high - low == pytest.approx(2 * statistics.stdev(expected))
    assert rows[("m1", "fast", 2.0)].seed_speedups == pytest.approx([20 / 8, 20 / (4 + 4 * 0.10 / 0.12),
                                                                     20 / (4 + 4 * 0.08 / 0.12)])


def test_accuracy_at_equal_time_and_a_recipe_that_does_not_reach_the_target(rows):
    slow_1, slow_2 = rows[("m1", "slow", 1.0)], rows[("m1", "slow", 2.0)]
    assert slow_1.speedup == pytest.approx(10 / (15 + 15 * 0.07 / 0.10))  # slower: 0.39x
    assert slow_1.top1_gain is None  # 10 s is before slow's cheapest run (15 s)
    assert slow_2.speedup is None and slow_2.recipe_seconds is None  # 70% is above slow's best (65%)
    assert slow_2.top1_gain == pytest.approx(0.55 + 0.10 * 5 / 15 - 0.70)  # slow at 20 s minus the baseline
    assert rows[("m1", "fast", 1.0)].top1_gain is None  # fast's runs all end before 10 s


def test_machines_are_never_mixed(rows):
    row = rows[("m2", "fast", 1.0)]
    assert row.baseline_seconds == 100.0 and row.speedup == pytest.approx(2.0)
    assert row.at_most  # fast's only point already reaches 62%: at least 2x
    assert rows[("m1", "fast", 1.0)].baseline_seconds == pytest.approx(10.0)


def test_verdicts_say_plainly_which_recipes_do_not_beat_the_baseline(rows):
    sentences = verdicts(list(rows.values()))
    assert sentences[("m1", "slow")].startswith("does not beat the baseline")
    assert sentences[("m1", "fast")] == "beats the baseline at every baseline budget"


def test_speedups_are_described_in_words(rows):
    assert describe_speedup(rows[("m1", "fast", 2.0)]) == f"{20 / (4 + 4 * 0.10 / 0.12):.2f}x faster to 70.0%"
    assert describe_speedup(rows[("m1", "slow", 1.0)]) == f"{(15 + 15 * 0.07 / 0.10) / 10:.2f}x slower to 62.0%"
    assert describe_speedup(rows[("m1", "slow", 2.0)]) == "does not reach 70.0%"
    assert describe_speedup(rows[("m2", "fast", 1.0)]) == "≥ 2.00x faster to 62.0%"
    header, body = speedup_rows([rows[("m1", "fast", 1.0)]])
    spread = body[0][header.index("speedup over seeds")]
    expected = [10 / (4 + 4 * 0.04 / 0.12), 10 / (4 + 4 * 0.02 / 0.12), 2.5]
    assert spread == f"{statistics.fmean(expected):.2f} ± {statistics.stdev(expected):.2f}x"


def test_spread_over_two_seeds_is_min_to_max_and_one_seed_has_none():
    assert Spread.of([2.0, 4.0]).low_high == (2.0, 4.0)
    assert Spread.of([2.0, 4.0]).describe("{:.1f}") == "3.0 (2.0-4.0)"
    assert Spread.of([3.0]).low_high == (3.0, 3.0) and Spread.of([3.0]).describe("{:.1f}") == "3.0"


def test_time_breakdown_is_milliseconds_per_step_over_all_runs_of_a_recipe():
    phases_a = {"data": 1.0, "forward": 2.0, "backward": 3.0, "optimizer": 0.5, "methods": 1.5, "methods.sam": 1.0}
    phases_b = {"data": 1.0, "forward": 2.0, "backward": 3.0, "optimizer": 0.5, "methods": 0.5, "methods.sam": 0.5}
    runs = [record("sam", 1.0, 0, 9.0, 0.5, phases=phases_a, steps=10, first=3.0),
            record("sam", 2.0, 0, 7.5, 0.6, phases=phases_b, steps=10, first=1.5)]
    row, = time_breakdown(runs)
    # 20 steps; other = 16.5 s of training minus 15 s of phases.
    assert row.ms_per_step == pytest.approx({"data": 100.0, "forward": 200.0, "backward": 300.0, "optimizer": 50.0,
                                             "methods.sam": 75.0, "methods (other)": 25.0, "other": 75.0})
    assert row.total_ms == pytest.approx(1000 * 16.5 / 20)
    assert row.first_epoch_seconds == pytest.approx(2.25)
    assert row.first_epoch_share == pytest.approx((3 / 9 + 1.5 / 7.5) / 2)


def test_a_curve_mixing_configurations_is_flagged():
    same = [dataclasses.replace(record("a", b, 0, 1.0, 0.5), setup_hash="s1") for b in (1.0, 2.0)]
    mixed = [dataclasses.replace(record("b", 1.0, 0, 1.0, 0.5), setup_hash="s1"),
             dataclasses.replace(record("b", 2.0, 0, 1.0, 0.5), setup_hash="s2"),
             dataclasses.replace(record("b", 2.0, 0, 1.0, 0.5, machine="m2"), setup_hash="s3")]
    assert mixed_curves(same + mixed) == [("m1", "b")]
