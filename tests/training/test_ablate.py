"""``python -m fastcore_ops.training.ablate``: the method switches, the effects against the base, and a tiny real ablation."""

import csv

import pytest

from fastcore_ops.training.ablate.arms import ablation_arms, methods_for, variants
from fastcore_ops.training.ablate.catalog import METHODS
from fastcore_ops.training.ablate.cli import main
from fastcore_ops.training.ablate.effects import method_effects
from fastcore_ops.training.ablate.report import ablation_report
from fastcore_ops.training.config import override, validate
from fastcore_ops.training.recipes import get_recipe
from fastcore_ops.training.tasks.registry import task_named
from fastcore_ops.training.tradeoff import sweep
from fastcore_ops.training.tradeoff.results import FailedRun, RunRecord
from tests.training.conftest import link_cifar_subset

BASES = {"image_classification": ["cifar_baseline", "cifar_hot"], "language_model": ["gpt_baseline", "gpt_alibi"]}


@pytest.mark.parametrize("task", list(BASES))
@pytest.mark.parametrize("name", list(METHODS))
@pytest.mark.parametrize("which", [0, 1])
def test_each_switch_turns_its_method_on_or_off_and_leaves_a_valid_configuration(task, name, which):
    config = get_recipe(BASES[task][which])
    base = config.name
    switch = METHODS[name]
    if not switch.applies_to(config):
        with pytest.raises(ValueError, match=f"applies to task {switch.method.task_names()[0]!r} only"):
            methods_for(task_named(config.task), [name])
        return
    change, assignments = switch.toggle(config)
    if (base, name) == ("cifar_hot", "cutmix"):  # one batch mixing at a time: the ablation refuses this variant
        with pytest.raises(ValueError, match="methods.cutmix must be None when methods.mixup is on"):
            override(config, list(assignments))
        return
    changed = override(config, list(assignments))
    validate(changed)
    assert switch.present(changed) == (change == "added") != switch.present(config)
    others = [other for other in METHODS.values() if other is not switch]
    assert [other.present(changed) for other in others] == [other.present(config) for other in others]


def test_variants_add_what_the_base_lacks_and_remove_what_it_has():
    names = [variant.name for variant in variants("cifar_hot", get_recipe("cifar_hot"), ["cutout", "mixup",
                                                                                          "stochastic_depth"])]
    assert names == ["cifar_hot", "cifar_hot+cutout", "cifar_hot-mixup", "cifar_hot-stochastic_depth"]


@pytest.mark.parametrize(("text", "message"), [("cutout,spicy", "--methods spicy: no such method; known: alibi, "),
                                               ("", "no method named"),
                                               ("ema,ema", "named twice")])
def test_bad_method_lists_are_named(text, message):
    with pytest.raises(ValueError, match=message):
        ablation_arms("cifar_baseline", text)


def test_all_means_the_methods_of_the_base_s_task_and_a_gpt_ablation_takes_alibi_and_warmup_apart():
    arms, _ = ablation_arms("cifar_mild", "all")
    assert "cifar_mild-alibi" not in [arm.name for arm in arms] and "cifar_mild-blurpool" in [arm.name for arm in arms]
    assert "blurpool" not in methods_for(task_named("language_model"), None)
    names = [v.name for v in variants("gpt_alibi", get_recipe("gpt_alibi"), ["alibi", "seq_length_warmup"])]
    assert names == ["gpt_alibi", "gpt_alibi-alibi", "gpt_alibi-seq_length_warmup"]


def _record(variant, seed, seconds, top1, steps=100, budget=1.0, machine="m/cpu"):
    return RunRecord.made_up(variant, budget, seed, quality=top1, seconds=seconds, steps=steps, machine=machine,
                             first_epoch_seconds=1.0, samples_per_second=1.0, config_hash="0" * 12)


def test_effects_pair_the_variant_with_the_base_seed_by_seed():
    records = [_record("b", 0, 100, 0.60), _record("b", 1, 100, 0.70), _record("b", 2, 100, 0.50),
               _record("b+x", 0, 90, 0.62, steps=90), _record("b+x", 1, 120, 0.69),  # seed 2 not run
               _record("b+y", 5, 100, 0.9),  # no seed shared with the base
               _record("b+x", 0, 10, 0.1, budget=0.5), _record("b", 0, 10, 0.1, machine="other/cpu")]
    (effect,) = method_effects(records, "b", 1.0)
    assert effect.label == "+x" and effect.quality_change.values == pytest.approx((0.02, -0.01))
    assert effect.step_time_change == pytest.approx((90 + 120) / (90 + 100) / (200 / 200) - 1)
    assert effect.speedup is None


NAN = float("nan")
IMAGE_TASK = task_named("image_classification")  # the task of the made-up base "b"
# The base and two variants over two seeds: +x gains 2 points; +y's seed 0 diverged and its seed 1 failed.
ABLATION = [_record("b", 0, 100, 0.60), _record("b", 1, 100, 0.62), _record("b+x", 0, 110, 0.62),
            _record("b+x", 1, 110, 0.64), _record("b+y", 0, 100, NAN),
            FailedRun("m/cpu", "b+y", 1.0, 1, "failed", "training exited with code 1", "runs/b+y-x1-s1/err.log")]


def _ablation_rows(out):
    with open(out / "ablation.csv") as file:
        return {row["variant"]: row for row in csv.DictReader(file)}


def test_a_variant_whose_runs_diverged_or_failed_is_listed_as_not_measured_and_the_rest_is_reported(tmp_path):
    written = ablation_report(ABLATION, tmp_path, "b", IMAGE_TASK)
    assert all(path.stat().st_size > 0 for path in written)
    rows = _ablation_rows(tmp_path)
    assert rows["b+x"]["per seed"] == "+2.00, +2.00" and rows["b+x"]["runs left out"] == ""
    assert (rows["b+y"]["top-1 change (points, + is better)"], rows["b+y"]["runs left out"]) == (
        "not measured", "seed 0 diverged; seed 1 failed")
    assert "| b+y | x1 | not measured |" in (tmp_path / "ablation.md").read_text()
    page = (tmp_path / "report.html").read_text()
    assert "runs/b+y-x1-s1/err.log" in page and "its summary gives top1 = nan" in page


def test_each_variant_s_change_with_test_time_augmentation_is_a_column_of_its_own(tmp_path):
    """The record's goal is judged with TTA: a method may change the plain top-1 and the TTA top-1 differently."""
    def run(variant, seed, top1, tta):
        return RunRecord.made_up(variant, 1.0, seed, quality=top1, machine="m/cpu", metrics={"top1_tta": tta})

    records = [run("b", 0, 0.60, 0.61), run("b", 1, 0.62, 0.64), run("b+x", 0, 0.62, 0.61), run("b+x", 1, 0.64, 0.63),
               run("b+y", 0, 0.50, 0.50), RunRecord.made_up("b+y", 1.0, 1, quality=0.52, machine="m/cpu")]
    ablation_report(records, tmp_path, "b", IMAGE_TASK)
    rows = _ablation_rows(tmp_path)
    column = "top-1 change with test-time augmentation (points, + is better)"
    assert rows["b+x"]["per seed"] == "+2.00, +2.00" and rows["b+x"][column] == "-0.50 (-1.00-+0.00)"
    assert rows["b+y"][column] == "-11.00"  # seed 1's run has no TTA top-1: seed 0 alone
    assert column in (tmp_path / "ablation.md").read_text().splitlines()[2]


def test_a_diverged_base_seed_is_named_beside_every_variant_and_a_base_that_never_finished_measures_nothing(tmp_path):
    base_lost = [_record("b", 0, 100, NAN), *ABLATION[1:4]]
    ablation_report(base_lost, tmp_path / "one", "b", IMAGE_TASK)
    assert _ablation_rows(tmp_path / "one")["b+x"]["per seed"] == "+2.00"  # seed 1 only
    assert _ablation_rows(tmp_path / "one")["b+x"]["runs left out"] == "base seed 0 diverged"
    no_base = [_record("b", seed, 100, NAN) for seed in (0, 1)] + ABLATION[2:4]
    ablation_report(no_base, tmp_path / "none", "b", IMAGE_TASK)
    row = _ablation_rows(tmp_path / "none")["b+x"]
    assert (row["top-1 change (points, + is better)"], row["runs left out"]) == (
        "not measured", "base seed 0 diverged; base seed 1 diverged")
    assert (tmp_path / "none" / "ablation.png").is_file()


def test_an_ablation_whose_every_run_failed_still_lists_them(tmp_path):
    written = ablation_report([ABLATION[-1]], tmp_path, "b")
    assert sorted(path.name for path in written) == ["report.html", "results.csv", "results.json"]
    assert "no effect to measure" in (tmp_path / "report.html").read_text()


def test_an_unknown_base_and_a_method_that_does_not_apply_are_refused_before_training(tmp_path, capsys):
    assert main(["--recipe", "cifar_spicy", "--out", str(tmp_path)]) == 2
    assert "--recipe cifar_spicy: no such recipe; known: " in capsys.readouterr().err
    assert main(["--recipe", "gpt_baseline", "--methods", "cutout", "--out", str(tmp_path)]) == 2
    assert "--methods: cutout applies to task 'image_classification' only" in capsys.readouterr().err
    assert main(["--recipe", "cifar_hot", "--methods", "cutmix", "--out", str(tmp_path)]) == 2
    assert "variant cifar_hot+cutmix: methods.cutmix must be None when methods.mixup is on" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(("flags", "message"), [
    (["--cost", "folder", "--seeds", "3"], "error: --cost prices finished runs; it takes no --seeds\n"),
    (["--cost", "folder", "--methods", "ema", "--budgets", "0.5,1"], "it takes no --methods, --budgets\n"),
    (["--rounds", "2"], "error: --rounds goes with --cost (the cost pass); leave it out or pass --cost FOLDER...\n"),
])
def test_the_sweep_s_flags_with_cost_and_the_cost_pass_s_without_it_are_refused(flags, message, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["--recipe", "cifar_baseline", *flags, "--out", str(out)]) == 2
    assert capsys.readouterr().err.endswith(message)
    assert not out.exists()


@pytest.mark.parametrize(("flags", "seeds"), [([], [3, 4]), (["--first-seed", "0"], [0, 1])])
def test_the_ablation_runs_on_seeds_no_search_used_unless_told_otherwise(flags, seeds, tmp_path, monkeypatch):
    plans = []
    monkeypatch.setattr(sweep, "execute_sweep", lambda plan: plans.append(plan) or 0)
    assert main(["--recipe", "gpt_baseline", "--methods", "alibi", *flags, "--out", str(tmp_path / "ablation")]) == 0
    assert sorted({run.seed for run in plans[0].runs}) == seeds


def test_a_tiny_ablation_trains_each_variant_and_reports_its_effect(tmp_path, capsys):
    data = link_cifar_subset(tmp_path / "cifar", train_per_class=20, test_per_class=5)
    out = tmp_path / "ablation"
    args = ["--recipe", "cifar_baseline", "--methods", "cutout,blurpool", "--budgets", "0.05", "--seeds", "1",
            "--data", str(data), "--out", str(out), "--no-progress", "--set", "data.batch_size=32",
            "--set", "data.num_workers=1", "--set", "schedule.epochs=4.0", "--set", "schedule.warmup_epochs=0.0"]
    code = main(args)
    captured = capsys.readouterr()
    assert code == 0, captured.err[-3000:]
    with open(out / "ablation.csv") as file:
        rows = list(csv.DictReader(file))
    assert [row["variant"] for row in rows] == ["cifar_baseline+cutout", "cifar_baseline+blurpool"]
    assert all(row["per seed"] and row["time per step change (%)"] for row in rows)
    summary = (out / "runs" / "cifar_baseline+blurpool-x0.05-s3" / "config.json").read_text()
    assert '"blurpool"' in summary and '"tta": {' in summary
    page = (out / "report.html").read_text()
    assert "Each method alone" in page and page.count("data:image/png;base64,") == 3
    assert "Test-time augmentation on cifar_baseline's runs" in (out / "ablation.md").read_text()


def test_a_base_with_its_own_tta_keeps_it_in_every_arm_and_a_base_without_gets_the_task_s():
    recipe = get_recipe("cifar_record_muon_resize")
    arms, shared = ablation_arms("cifar_record_muon_resize", "ema,progressive_resize")
    assert shared == ()
    for arm in arms:
        assert override(recipe, [*shared, *arm.assignments]).methods.tta == recipe.methods.tta
    _, shared = ablation_arms("cifar_baseline", "ema")
    assert get_recipe("cifar_baseline").methods.tta is None
    assert override(get_recipe("cifar_baseline"), list(shared)).methods.tta is not None
