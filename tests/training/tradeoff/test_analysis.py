"""Speedups, quality at equal time, verdicts and the time breakdown, against hand-computed curves.

Top-1 (higher is better) first, then validation loss (lower is better) through the same code.
"""

import dataclasses
import statistics

import pytest

from fastcore_ops.training.tradeoff.analysis import Spread, mixed_curves, speedup_table, time_breakdown
from fastcore_ops.training.tradeoff.metric import TOP1, Metric
from fastcore_ops.training.tradeoff.results import RunRecord
from fastcore_ops.training.tradeoff.run_table import RunTable
from fastcore_ops.training.tradeoff.tables import describe_speedup, run_rows, speedup_rows, verdicts

LOSS = Metric("eval_loss", higher_is_better=False, label="validation loss (nats/token)")


def record(recipe, budget, seed, seconds, top1, machine="m1", phases=None, steps=10, first=None):
    return RunRecord.made_up(recipe, budget, seed, quality=top1, seconds=seconds, machine=machine, steps=steps,
                             first_epoch_seconds=seconds if first is None else first, samples_per_second=100.0,
                             metrics={"eval_loss": 1.0}, phases=phases, config_hash="abc")


def lm_record(recipe, budget, seed, seconds, loss, machine="m1"):
    return RunRecord.made_up(recipe, budget, seed, quality=loss, seconds=seconds, metric=LOSS, machine=machine,
                             first_epoch_seconds=seconds / 3, samples_per_second=5120.0, sample_unit="tokens",
                             metrics={"bits_per_byte": 1.44 * loss, "perplexity": 2.718 ** loss}, config_hash="abc")


BASE = [record("base", 1.0, s, 10.0, a) for s, a in enumerate((0.60, 0.62, 0.64))] + \
       [record("base", 2.0, s, 20.0, 0.70) for s in range(3)]
FAST = [record("fast", 0.5, s, 4.0, a) for s, a in enumerate((0.58, 0.60, 0.62))] + \
       [record("fast", 1.0, s, 8.0, a) for s, a in enumerate((0.70, 0.72, 0.74))]
SLOW = [record("slow", 1.0, 0, 15.0, 0.55), record("slow", 2.0, 0, 30.0, 0.65)]
# A second machine, ten times slower: if its times leaked into m1's curves, m1's numbers would move.
OTHER = [record("base", 1.0, 0, 100.0, 0.62, machine="m2"), record("fast", 1.0, 0, 50.0, 0.62, machine="m2")]


@pytest.fixture(scope="module")
def rows():
    table = speedup_table(RunTable.of(BASE + FAST + SLOW + OTHER), baseline="base")
    return {(row.machine, row.recipe, row.baseline_budget): row for row in table}


def test_only_non_baseline_recipes_at_each_baseline_budget_per_machine(rows):
    assert sorted(rows) == [("m1", "fast", 1.0), ("m1", "fast", 2.0), ("m1", "slow", 1.0), ("m1", "slow", 2.0),
                            ("m2", "fast", 1.0)]


def test_speedup_to_the_baseline_accuracy_is_interpolated_along_the_mean_curve(rows):
    # fast's mean curve: (4 s, 60%), (8 s, 72%). Baseline x1: 10 s for 62% (mean of 60, 62, 64).
    row = rows[("m1", "fast", 1.0)]
    assert row.target == pytest.approx(0.62) and row.baseline_seconds == pytest.approx(10.0)
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


def test_top1_at_equal_time_and_a_recipe_that_does_not_reach_the_target(rows):
    slow_1, slow_2 = rows[("m1", "slow", 1.0)], rows[("m1", "slow", 2.0)]
    assert slow_1.speedup == pytest.approx(10 / (15 + 15 * 0.07 / 0.10))  # slower: 0.39x
    assert slow_1.gain is None  # 10 s is before slow's cheapest run (15 s)
    assert slow_2.speedup is None and slow_2.recipe_seconds is None  # 70% is above slow's best (65%)
    assert slow_2.gain == pytest.approx(0.55 + 0.10 * 5 / 15 - 0.70)  # slow at 20 s minus the baseline
    assert rows[("m1", "fast", 1.0)].gain is None  # fast's runs all end before 10 s


def test_machines_are_never_mixed(rows):
    row = rows[("m2", "fast", 1.0)]
    assert row.baseline_seconds == 100.0 and row.speedup == pytest.approx(2.0)
    assert row.at_most  # fast's only point already reaches 62%: at least 2x
    assert rows[("m1", "fast", 1.0)].baseline_seconds == pytest.approx(10.0)


def test_verdicts_say_plainly_which_recipes_do_not_beat_the_baseline(rows):
    sentences = verdicts(list(rows.values()))
    assert sentences[("m1", "slow")].startswith("does not beat the baseline")
    assert sentences[("m1", "fast")] == ("beats the baseline at each of the baseline's 2 budgets "
                                         f"(at x1: {10 / (4 + 4 * 0.02 / 0.12):.2f}x faster to 62.0% top-1)")


def test_a_verdict_over_one_baseline_budget_says_so(rows):
    one_budget = [row for row in rows.values() if row.baseline_budget == 1.0]
    assert verdicts(one_budget)[("m1", "fast")].startswith(
        "beats the baseline at the one baseline budget measured (at x1:")


def test_speedups_are_described_in_words(rows):
    assert describe_speedup(rows[("m1", "fast", 2.0)]) == f"{20 / (4 + 4 * 0.10 / 0.12):.2f}x faster to 70.0% top-1"
    assert describe_speedup(rows[("m1", "slow", 1.0)]) == f"{(15 + 15 * 0.07 / 0.10) / 10:.2f}x slower to 62.0% top-1"
    assert describe_speedup(rows[("m1", "slow", 2.0)]) == "does not reach 70.0% top-1"
    assert describe_speedup(rows[("m2", "fast", 1.0)]) == "≥ 2.00x faster to 62.0% top-1"
    # Bounded by its cheapest point (at most 12.5 s for the baseline's 10 s): at most 1.25x slower.
    bounded_slow = dataclasses.replace(rows[("m2", "fast", 1.0)], recipe_seconds=12.5, speedup=0.8)
    assert describe_speedup(bounded_slow) == "≤ 1.25x slower to 62.0% top-1"
    header, body = speedup_rows([rows[("m1", "fast", 1.0)]], TOP1)
    spread = body[0][header.index("speedup over seeds")]
    expected = [10 / (4 + 4 * 0.04 / 0.12), 10 / (4 + 4 * 0.02 / 0.12), 2.5]
    assert spread == f"{statistics.fmean(expected):.2f} ± {statistics.stdev(expected):.2f}x"
    assert body[0][header.index("speedup per seed")] == ", ".join(f"{value:.2f}x" for value in expected)


def test_spread_over_two_seeds_is_min_to_max_and_one_seed_has_none():
    assert Spread.of([2.0, 4.0]).low_high == (2.0, 4.0)
    assert Spread.of([2.0, 4.0]).describe("{:.1f}") == "3.0 (2.0-4.0)"
    assert Spread.of([3.0]).low_high == (3.0, 3.0) and Spread.of([3.0]).describe("{:.1f}") == "3.0"


def test_time_breakdown_is_milliseconds_per_step_over_all_runs_of_a_recipe():
    phases_a = {"data": 1.0, "forward": 2.0, "backward": 3.0, "optimizer": 0.5, "methods": 1.5, "methods.sam": 1.0}
    phases_b = {"data": 1.0, "forward": 2.0, "backward": 3.0, "optimizer": 0.5, "methods": 0.5, "methods.sam": 0.5}
    runs = [record("sam", 1.0, 0, 9.0, 0.5, phases=phases_a, steps=10, first=3.0),
            record("sam", 2.0, 0, 7.5, 0.6, phases=phases_b, steps=10, first=1.5)]
    row, = time_breakdown(RunTable.of(runs))
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


def test_a_curve_mixing_precisions_behind_one_machine_label_is_flagged():
    """"amp" is bf16 on one CPU and fp32 on another; under an old label ("vm/cpu") both look alike."""
    fp32, bf16 = (dataclasses.replace(record("b", budget, 0, 1.0, 0.5), setup_hash="s1", precision=precision)
                  for budget, precision in ((1.0, "fp32"), (2.0, "bf16 autocast")))
    unrecorded = dataclasses.replace(record("a", 1.0, 0, 1.0, 0.5), setup_hash="s1")
    assert mixed_curves([fp32, bf16, unrecorded]) == [("m1", "b")]
    assert mixed_curves([fp32, unrecorded]) == []


def test_the_top1_tables_keep_their_percent_columns(rows):
    header, body = speedup_rows([rows[("m1", "slow", 2.0)]], TOP1)
    cells = dict(zip(header, body[0]))
    assert cells["baseline top-1 (%)"] == "70.00"
    assert cells["recipe time to that top-1 (s)"] == ""
    assert cells["top-1 gain at baseline time (pp)"] == f"{100 * (0.55 + 0.10 * 5 / 15 - 0.70):+.2f}"  # -1.67
    header, body = run_rows(BASE[:1], TOP1)
    assert dict(zip(header, body[0]))["top-1 (%)"] == "60.00"
    assert dict(zip(header, body[0]))["throughput"] == "100 images/s"


# Language models, validation loss in nats/token (lower is better). The baseline reaches 2.0 at
# 100 s and 1.5 at 200 s; "half" reaches them in half the time, starting from 2.5 at 25 s so
# that both targets are interpolated, not bounded; "worse" never gets below 2.2.
LM_BASE = [lm_record("gpt_base", 1.0, s, 100.0, loss) for s, loss in enumerate((1.9, 2.1))] + \
          [lm_record("gpt_base", 2.0, s, 200.0, loss) for s, loss in enumerate((1.4, 1.6))]
LM_HALF = [lm_record("gpt_half", budget, s, seconds, mean + (0.1 if s else -0.1))
           for budget, seconds, mean in ((0.5, 25.0, 2.5), (1.0, 50.0, 2.0), (2.0, 100.0, 1.5)) for s in (0, 1)]
LM_WORSE = [lm_record("gpt_worse", 1.0, 0, 100.0, 2.6), lm_record("gpt_worse", 2.0, 0, 200.0, 2.2)]


@pytest.fixture(scope="module")
def lm_rows():
    table = speedup_table(RunTable.of(LM_BASE + LM_HALF + LM_WORSE), baseline="gpt_base")
    return {(row.recipe, row.baseline_budget): row for row in table}


def test_a_recipe_reaching_the_baseline_loss_in_half_the_time_is_two_times_faster(lm_rows):
    for budget, seconds, loss in ((1.0, 100.0, 2.0), (2.0, 200.0, 1.5)):
        row = lm_rows[("gpt_half", budget)]
        assert row.metric == LOSS and row.target == pytest.approx(loss)
        assert row.baseline_seconds == pytest.approx(seconds)
        assert row.recipe_seconds == pytest.approx(seconds / 2) and row.speedup == pytest.approx(2.0)
        assert not row.at_most
    # Each seed's own curve against the baseline's mean loss. Seed 0 (2.4, 1.9, 1.4) gets to 2.0
    # at 25 + 25 * 0.4 / 0.5 = 45 s and to 1.5 at 50 + 50 * 0.4 / 0.5 = 90 s; seed 1 (2.6, 2.1,
    # 1.6) gets to 2.0 at 50 + 50 * 0.1 / 0.5 = 60 s and never to 1.5.
    assert lm_rows[("gpt_half", 1.0)].seed_speedups == pytest.approx([100 / 45, 100 / 60])
    assert lm_rows[("gpt_half", 2.0)].seed_speedups == pytest.approx([200 / 90])


def test_a_loss_decrease_at_equal_time_is_a_gain(lm_rows):
    # At the baseline's 100 s, half is at 1.5 (its x2 point), the baseline at 2.0: lower by 0.5.
    assert lm_rows[("gpt_half", 1.0)].gain == pytest.approx(0.5)
    # At 200 s, worse is at 2.2 against the baseline's 1.5: 0.7 higher, a loss of quality.
    assert lm_rows[("gpt_worse", 2.0)].gain == pytest.approx(-0.7)
    assert lm_rows[("gpt_worse", 2.0)].speedup is None and lm_rows[("gpt_worse", 1.0)].speedup is None


def test_loss_speedups_and_gains_are_written_in_the_metric_s_words(lm_rows):
    assert describe_speedup(lm_rows[("gpt_half", 1.0)]) == "2.00x faster to 2.00 nats/token validation loss"
    assert describe_speedup(lm_rows[("gpt_worse", 2.0)]) == "does not reach 1.50 nats/token validation loss"
    header, body = speedup_rows([lm_rows[("gpt_half", 1.0)], lm_rows[("gpt_worse", 2.0)]], LOSS)
    assert header[3] == "baseline validation loss (nats/token)"
    assert header[5] == "recipe time to that validation loss (s)"
    assert header[-1] == "validation loss gain at baseline time (nats/token)"
    half, worse = (dict(zip(header, row)) for row in body)
    assert half["baseline validation loss (nats/token)"] == "2.000"  # raw nats, never "200.00"
    assert half[header[-1]] == "lower by 0.500" and worse[header[-1]] == "higher by 0.700"
    header, body = run_rows(LM_BASE[:1], LOSS)
    assert dict(zip(header, body[0]))["validation loss (nats/token)"] == "1.900"
    assert dict(zip(header, body[0]))["throughput"] == "5120 tokens/s"


def test_loss_verdicts(lm_rows):
    sentences = verdicts(list(lm_rows.values()))
    assert sentences[("m1", "gpt_half")] == ("beats the baseline at each of the baseline's 2 budgets "
                                             "(at x1: 2.00x faster to 2.00 nats/token validation loss)")
    assert sentences[("m1", "gpt_worse")] == ("does not beat the baseline: it reaches the baseline's validation loss "
                                              "sooner at no budget and is better at none of the baseline's times "
                                              "(at x1: does not reach 2.00 nats/token validation loss)")


def test_a_verdict_without_a_full_budget_baseline_quotes_its_largest_budget(lm_rows):
    rows = [row for row in lm_rows.values() if row.baseline_budget != 1.0]
    assert verdicts(rows)[("m1", "gpt_half")].endswith("(at x2: 2.00x faster to 1.50 nats/token validation loss)")


def test_reading_a_loss_as_if_higher_were_better_would_change_the_answer():
    # Read upwards, the baseline's 2.0 is "reached" at once by half's first point (2.5 at 25 s),
    # and half's 1.5 at 100 s is a loss of 0.5 against the baseline's 2.0, not a gain.
    flipped = [dataclasses.replace(r, higher_is_better=True) for r in LM_BASE + LM_HALF]
    row = next(r for r in speedup_table(RunTable.of(flipped), "gpt_base") if r.baseline_budget == 1.0)
    assert row.at_most and row.speedup == pytest.approx(4.0) and row.gain == pytest.approx(-0.5)


def test_records_of_different_metrics_are_refused_naming_recipes_and_metrics():
    with pytest.raises(ValueError) as refused:
        speedup_table(RunTable.of(BASE + LM_BASE), baseline="base")
    message = str(refused.value)
    assert "base measure top1 (top-1 (%), higher is better)" in message
    assert "gpt_base measure eval_loss (validation loss (nats/token), lower is better)" in message
    assert "recipes of one task" in message
    with pytest.raises(ValueError, match="the rows measure top1"):
        speedup_rows(speedup_table(RunTable.of(BASE + FAST), baseline="base"), LOSS)


def test_a_baseline_budget_past_its_plateau_is_timed_where_a_shorter_one_reached_its_quality():
    # The baseline's x4 ends at 69%, below its x2's 70%: its curve first reaches 69% at 10 + 10 * 7/8 s.
    base = [RunRecord.made_up("base", budget, seconds=seconds, quality=quality)
            for budget, seconds, quality in [(1.0, 10, 0.62), (2.0, 20, 0.70), (4.0, 40, 0.69)]]
    fast = [RunRecord.made_up("fast", 1.0, seconds=5, quality=0.60),
            RunRecord.made_up("fast", 2.0, seconds=9, quality=0.72)]
    rows = {row.baseline_budget: row for row in speedup_table(RunTable.of(base + fast), baseline="base")}
    plateau = rows[4.0]
    assert plateau.baseline_seconds == pytest.approx(10 + 10 * 0.07 / 0.08) and plateau.budget_seconds == 40
    assert plateau.speedup == pytest.approx((10 + 10 * 0.07 / 0.08) / (5 + 4 * 0.09 / 0.12))
    assert [rows[budget].budget_seconds for budget in (1.0, 2.0)] == [None, None]
    assert rows[2.0].baseline_seconds == 20
    _, body = speedup_rows([plateau], TOP1)
    assert body[0][4] == f"{10 + 10 * 0.07 / 0.08:.1f} (reached sooner by a shorter budget; x4 took 40.0)"
