"""The cost pass's files from elsewhere (results.json, a run's config.json, --times' costs.json) as hostile input:
each bad value refused in one ``error:`` line naming the file, before anything is planned, timed or written."""

import json

import pytest

from fastcore_ops.training.config import config_hash, override, to_dict
from fastcore_ops.training.recipes import get_recipe
from fastcore_ops.training.tradeoff.cli import main
from fastcore_ops.training.tradeoff.cost_inputs import record_config
from fastcore_ops.training.tradeoff.cost_plans import plan_records
from fastcore_ops.training.tradeoff.planning import PlannedRun, run_config
from fastcore_ops.training.tradeoff.pricing import model_runs
from fastcore_ops.training.tradeoff.results import RunRecord, write_results
from fastcore_ops.training.tradeoff.costs_file import read_costs, write_costs
from fastcore_ops.training.tradeoff.step_costs import KindCost, SetupCost, StepCosts
from fastcore_ops.training.tradeoff.step_kinds import MAX_PLANNED_STEPS, RunPlan, StepKind, plan_run
from tests.training.tradeoff.test_cost_pass import _costs, fake_trainer


def _refused(args, capsys) -> str:
    """The one error line of ``python -m fastcore_ops.training.tradeoff ARGS``, which must exit 2."""
    assert main(args) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("error: ") and captured.err.count("\n") == 1, captured.err
    assert "Traceback" not in captured.err
    return captured.err


def _sweep_with_config(root, text_of=json.dumps, **changes):
    """A sweep folder whose one run, cifar_mild x1 seed 0, trained 100 steps and left a config.json of ``changes``."""
    config = override(get_recipe("cifar_mild"), [f"{key}={value}" for key, value in changes.items()])
    folder = root / "sweep" / "runs" / PlannedRun("cifar_mild", 1.0, 0, 0.0).folder_name
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(text_of(to_dict(config)))
    write_results([RunRecord.made_up("cifar_mild", 1.0, 0, config_hash=config_hash(config))], root / "sweep")
    return root / "sweep", folder / "config.json"


HUGE = "1" + "0" * 400  # a JSON integer no float holds


@pytest.mark.parametrize("epochs", ["1e300", "huge integer"])
def test_a_config_with_an_epoch_count_no_run_trains_is_refused_naming_it(epochs, data, tmp_path, capsys):
    """1e300 epochs made the plan walk steps without end; a 400-digit integer overflowed float() in a traceback."""
    if epochs == "1e300":
        sweep, path = _sweep_with_config(tmp_path, **{"schedule.epochs": 1e300})
    else:
        sweep, path = _sweep_with_config(tmp_path, lambda values: json.dumps(values).replace(
            '"epochs": 12345.0', f'"epochs": {HUGE}'), **{"schedule.epochs": 12345.0})
    error = _refused(["--cost", str(sweep), "--data", str(data), "--out", str(tmp_path / "costed")], capsys)
    assert f"the configuration {path} " in error
    assert ("plans 1e+300 epochs" if epochs == "1e300" else "must be a number a float holds") in error
    assert not (tmp_path / "costed").exists()


def test_a_record_longer_than_a_plan_walks_or_at_a_budget_no_run_trains_is_refused(data, tmp_path, capsys):
    write_results([RunRecord.made_up("cifar_mild", steps=MAX_PLANNED_STEPS + 1)], tmp_path / "long")
    error = _refused(["--cost", str(tmp_path / "long"), "--data", str(data), "--out", str(tmp_path / "costed")], capsys)
    assert f"{tmp_path / 'long' / 'results.json'}: run cifar_mild x1 seed 0 gives {MAX_PLANNED_STEPS + 1} steps" in error
    # A recipe rebuilt at the budget its results.json gives (no config.json kept): 1e300 x its epochs.
    rebuilt = config_hash(run_config(PlannedRun("cifar_mild", 1e300, 0, 0.0), ()))
    write_results([RunRecord.made_up("cifar_mild", 1e300, config_hash=rebuilt)], tmp_path / "far")
    error = _refused(["--cost", str(tmp_path / "far"), "--data", str(data), "--out", str(tmp_path / "costed")], capsys)
    assert "run cifar_mild x1e+300 seed 0's recipe at its budget plans" in error
    assert not (tmp_path / "costed").exists()


def test_a_plan_never_walks_more_steps_than_its_bound_or_than_the_run_trained():
    with pytest.raises(ValueError, match=f"would train about 2\\*\\*996 steps, more than the {MAX_PLANNED_STEPS}"):
        plan_run(fake_trainer(total_steps=10**300), "s")
    trainer = fake_trainer(total_steps=10**12)  # walked, this would not end within the test's time
    trainer.train_loader.close = trainer.task.close = lambda: None
    record = RunRecord.made_up("cifar_mild", steps=10)
    config = run_config(PlannedRun("cifar_mild", 1.0, 0, 0.0), ())
    with pytest.raises(ValueError, match="trained 10 steps, but on this data it would train 1000000000000"):
        plan_records([record], {record.key: config}, lambda _: trainer)


@pytest.mark.parametrize("recipe", ["../escaped", "a/b", "..", "x\\y", "two\nlines"])
def test_a_recipe_name_that_would_leave_the_runs_folder_is_refused_naming_the_file(recipe, data, tmp_path, capsys):
    """The name was followed to ../escaped-x1-s0/config.json, outside the folder, and that configuration priced."""
    config = run_config(PlannedRun("cifar_mild", 1.0, 0, 0.0), ())
    outside = tmp_path / "escaped-x1-s0"
    outside.mkdir()
    (outside / "config.json").write_text(json.dumps(to_dict(config)))
    write_results([RunRecord.made_up(recipe, config_hash=config_hash(config))], tmp_path / "sweep")
    error = _refused(["--cost", str(tmp_path / "sweep"), "--data", str(data), "--out", str(tmp_path / "costed")],
                     capsys)
    assert f"{tmp_path / 'sweep' / 'results.json'}: row 0: the recipe {recipe!r} " in error
    assert not (tmp_path / "costed").exists()
    with pytest.raises(ValueError, match="it names the run's folder"):  # for callers that read results.json themselves
        record_config(RunRecord.made_up(recipe, config_hash=config_hash(config)), [tmp_path / "sweep"])


@pytest.mark.parametrize("change, problem", [
    (lambda d: d["kinds"][0].update(kept_seconds="@1e400@"),
     r"kinds\[0\].kept_seconds must be a finite number of seconds > 0 \(a step takes time\), got float inf"),
    (lambda d: d["kinds"][0].update(decoded_seconds="@1e400@", kept_seconds="@1e400@"),  # inf - inf: NaN
     r"kinds\[0\].decoded_seconds must be a finite number of seconds > 0 \(a step takes time\), got float inf"),
    (lambda d: d["kinds"][0].update(kept_seconds=f"@{HUGE}@"), r"kinds\[0\].kept_seconds must be .*, got int 1000"),
    (lambda d: d["kinds"][0].update(kept_seconds=0), r"kinds\[0\].kept_seconds must be .* > 0 .*, got int 0"),
    (lambda d: d["setups"][0].update(setup_seconds=-0.5), r"setups\[0\].setup_seconds must be .* >= 0, got float -0.5"),
    (lambda d: d["setups"][0].update(epoch_start_seconds="@-1e400@"),
     r"setups\[0\].epoch_start_seconds must be a finite number of seconds, got float -inf"),
    (lambda d: d["setups"][0].update(size_start_seconds=-1e6),
     r"setups\[0\].size_start_seconds must be a number of seconds >= -20 \(no window of 40 steps of setup s"),
    (lambda d: d["setups"][0].update(decoding_workers=f"@{HUGE}@"), r"setups\[0\].decoding_workers must be <= 65536"),
    (lambda d: d.update(warmup=10**12), r"warmup must be <= 10000000 steps"),
])
def test_a_costs_file_with_a_time_no_step_takes_is_refused_naming_it_and_the_field(tmp_path, change, problem):
    """Numbers JSON parses (1e400 is inf) that no cost pass writes: each priced runs wrongly or ended in a traceback."""
    path = tmp_path / "costs.json"
    write_costs(_costs(), path)
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document).replace('"@', "").replace('@"', ""))  # "@1e400@" written as 1e400
    with pytest.raises(ValueError, match=f"{path}: {problem}"):
        read_costs(path)


def test_all_zero_step_times_are_refused_in_one_line(data, tmp_path, capsys):
    """They ended in a ZeroDivisionError's traceback once a run's modelled time, 0 s, rescaled its throughput."""
    zero = StepKind("s", 32)
    write_costs(StepCosts("cpu x", 1, 1, 0, 1, {zero: KindCost(zero, 0.0, 0.0, 1)},
                          {"s": SetupCost("s", "cifar_mild", "fp32", 0.0, 0.0, 0.0, 0)}), tmp_path / "costs.json")
    write_results([RunRecord.made_up("cifar_mild", 1.0, 2)], tmp_path / "sweep")
    error = _refused(["--cost", str(tmp_path / "sweep"), "--data", str(data), "--times", str(tmp_path / "costs.json"),
                      "--out", str(tmp_path / "costed")], capsys)
    assert f"{tmp_path / 'costs.json'}: kinds[0].decoded_seconds must be a finite number of seconds > 0" in error
    assert not (tmp_path / "costed").exists()


@pytest.mark.parametrize("kept, size_start", [(0.0, 0.0), (1.0, -5.0), (1e308, 0.0), (5e-324, 0.0)],
                         ids=["zero", "starts-below-zero", "overflow", "throughput-overflow"])
def test_a_modelled_time_no_run_takes_is_refused_naming_the_step_times(kept, size_start):
    """Step times built in memory (or timed here) pass the model's own check: finite, > 0, a record the report takes."""
    kind = StepKind("s", 32)
    costs = StepCosts("cpu x", 1, 1, 0, 1, {kind: KindCost(kind, kept, kept, 1)},
                      {"s": SetupCost("s", "r", "fp32", 0.0, size_start, 0.0, 0)})
    record = RunRecord.made_up(steps=4)
    plan = RunPlan({kind: 4}, {kind: 1.0}, (32,), 1, {kind: 0}, 4, 4)
    with pytest.raises(ValueError, match="^run r x1 seed 0: the step times in c.json give it a modelled time of"):
        model_runs([record], {record.key: plan}, costs, "the step times in c.json")
