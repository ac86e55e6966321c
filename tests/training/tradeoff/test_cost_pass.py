"""The cost pass's parts: step kinds and plans, windows, the model's arithmetic, and its file read back as untrusted."""

import json
from types import SimpleNamespace

import pytest

from fastcore_ops.data.backends.pil import default_num_workers
from fastcore_ops.training.config import config_hash, setup_hash
from fastcore_ops.training.methods.layer_freezing import LayerFreezing
from fastcore_ops.training.methods.sam import SAM
from fastcore_ops.training.methods.selective_backprop import SelectiveBackprop, SelectiveBackpropOptions
from fastcore_ops.training.methods.seq_length_warmup import SequenceLengthWarmup
from fastcore_ops.training.tradeoff.cost_pass import choose_windows, timed_steps
from fastcore_ops.training.tradeoff.cost_plans import plan_records
from fastcore_ops.training.tradeoff.costs_file import read_costs, write_costs
from fastcore_ops.training.tradeoff.planning import PlannedRun, run_config
from fastcore_ops.training.tradeoff.results import RunRecord
from fastcore_ops.training.tradeoff.step_costs import KindCost, ModelledTime, SetupCost, StepCosts
from fastcore_ops.training.tradeoff.step_kinds import RunPlan, StepKind, kind_function, plan_run
from fastcore_ops.training.tradeoff.trained_config import record_config


def fake_trainer(*, steps_per_epoch=4, total_steps=10, sizes=None, workers=2, methods=()):
    """What plan_run reads of a trainer: its state's shape, its loader's sizes and workers, its methods."""
    loader = SimpleNamespace(image_size=32, decoding_workers=workers,
                             image_size_at=(lambda epoch, batch: sizes(epoch, batch)) if sizes else (lambda e, b: None))
    return SimpleNamespace(state=SimpleNamespace(steps_per_epoch=steps_per_epoch, total_steps=total_steps),
                           train_loader=loader, methods=list(methods), task=SimpleNamespace())


def test_methods_name_the_steps_whose_cost_they_change():
    assert [SAM(0.05, interval=3).cost_state(step, 0.0) for step in range(4)] == [
        "sam second pass", None, None, "sam second pass"]
    selective = SelectiveBackprop(SelectiveBackpropOptions(start=0.5, end=0.9, keep=0.5, interrupt=0))
    assert (selective.cost_state(1, 0.2), selective.cost_state(1, 0.6)) == (None, "selective backprop keeps 0.5")
    freezing = LayerFreezing(freeze_start=0.5, freeze_level=1.0)
    assert [freezing.cost_state(0, progress) for progress in (0.25, 0.5, 0.75, 1.0)] == [
        None, None, "50% of layers frozen", "100% of layers frozen"]
    warmup = SequenceLengthWarmup(full_length=64, start_length=8, duration=0.5)
    assert (warmup.cost_state(0, 0.0), warmup.cost_state(0, 0.9)) == ("sequences of 8", None)


def test_a_plan_counts_every_step_by_kind_and_the_images_decoded_afresh():
    trainer = fake_trainer(sizes=lambda epoch, batch: 16 if epoch < 2 else 32, methods=[SAM(0.05, interval=2)])
    plan = plan_run(trainer, "s")
    small, small_sam = StepKind("s", 16), StepKind("s", 16, ("sam second pass",))
    large, large_sam = StepKind("s", 32), StepKind("s", 32, ("sam second pass",))
    assert plan.steps == {small_sam: 4, small: 4, large_sam: 1, large: 1}
    assert (plan.total_steps, plan.epochs, plan.sizes, plan.first_steps[large]) == (10, 3, (16, 32), 9)
    # 16 px: its first epoch decodes every image, its second half of them (two workers); 32 px is new again.
    assert plan.decodes == {small_sam: 3.0, small: 3.0, large_sam: 1.0, large: 1.0}
    assert sum(plan.steps.values()) == plan.total_steps


def test_one_worker_keeps_every_image_after_the_first_pass_and_a_loader_without_sizes_has_one_kind():
    plan = plan_run(fake_trainer(workers=1), "s")
    assert plan.steps == {StepKind("s", 32): 10} and plan.decodes == {StepKind("s", 32): 4.0}


def test_windows_fit_in_an_epoch_and_time_every_kind_once():
    trainer = fake_trainer(steps_per_epoch=100, total_steps=400, sizes=lambda epoch, batch: 16 if epoch < 2 else 32)
    plan = plan_run(trainer, "s")
    windows = choose_windows(kind_function(trainer, "s"), plan, "config", "s", "r", {}, warmup=4, timed=10)
    assert [(window.first_step, window.length, window.warmup) for window in windows] == [(0, 14, 4), (200, 14, 4)]
    # A kind that another window already timed enough gets none of its own.
    covered = {StepKind("s", 16): 10}
    assert [window.first_step for window in choose_windows(kind_function(trainer, "s"), plan, "config", "s", "r", covered,
                                                           warmup=4, timed=10)] == [200]


def test_a_window_too_long_for_its_epoch_starts_where_one_fits():
    trainer = fake_trainer(steps_per_epoch=20, total_steps=60, sizes=lambda epoch, batch: 16 if epoch * 20 + batch < 16
                           else 32)
    windows = choose_windows(kind_function(trainer, "s"), plan_run(trainer, "s"), "config", "s", "r", {}, warmup=2, timed=10)
    assert [window.first_step for window in windows] == [0, 20]  # 32 px first at step 16, but its epoch ends at 20


def test_a_window_goes_on_until_a_rare_kind_has_enough_steady_steps():
    trainer = fake_trainer(steps_per_epoch=1000, total_steps=1000, methods=[SAM(0.05, interval=10)])
    windows = choose_windows(kind_function(trainer, "s"), plan_run(trainer, "s"), "config", "s", "r", {}, warmup=8, timed=32)
    # One window from step 0: its 8th steady second pass is step 80; the plain steps are timed in it too.
    assert [(window.first_step, window.length) for window in windows] == [(0, 81)]


def test_steady_steps_restart_after_each_change_of_image_size():
    assert timed_steps(lambda step: StepKind("s", 16 if step < 6 else 20), 0, 12, warmup=3) == [3, 4, 5, 9, 10, 11]


def _costs(workers=2):
    small, large = StepKind("s", 16), StepKind("s", 32)
    return StepCosts(machine="cpu x", threads=2, rounds=3, warmup=8, timed=32,
                     kinds={small: KindCost(small, 0.2, 0.1, 9), large: KindCost(large, 0.5, 0.4, 9)},
                     setups={"s": SetupCost("s", "cifar_mild", "bf16 autocast", 3.0, 1.5, -0.25, workers)},
                     library={"torch": "2.x"})


def test_the_modelled_time_is_setup_starts_steps_and_decoding():
    plan = RunPlan(steps={StepKind("s", 16): 100, StepKind("s", 32): 50},
                   decodes={StepKind("s", 16): 40.0, StepKind("s", 32): 10.0}, sizes=(16, 32), epochs=3,
                   first_steps={}, steps_per_epoch=50, total_steps=150)
    modelled = _costs().modelled(plan)
    assert modelled == ModelledTime(steps_seconds=100 * 0.1 + 50 * 0.4, decoding_seconds=40 * 0.1 + 10 * 0.1,
                                    starts_seconds=2 * 1.5 - 2 * 0.25, setup_seconds=3.0)
    assert modelled.seconds == pytest.approx(30 + 5 + 2.5 + 3)
    with pytest.raises(ValueError, match="24 px of setup s were never timed"):
        _costs().modelled(RunPlan({StepKind("s", 24): 1}, {}, (24,), 1, {}, 1, 1))


@pytest.mark.parametrize("workers", [0, 2, None])
def test_costs_read_back_as_written(tmp_path, workers):
    write_costs(_costs(workers), tmp_path / "costs.json")
    assert read_costs(tmp_path / "costs.json") == _costs(workers)


def test_an_earlier_passs_file_without_its_decoding_workers_reads_as_unrecorded(tmp_path):
    path = tmp_path / "costs.json"
    write_costs(_costs(), path)
    document = json.loads(path.read_text())
    del document["setups"][0]["decoding_workers"]
    path.write_text(json.dumps(document))
    assert read_costs(path).setups["s"].decoding_workers is None


def test_prices_from_an_earlier_pass_are_planned_with_the_decoding_workers_it_timed_with():
    config = run_config(PlannedRun("cifar_mild", 1.0, 0, 0.0), ())
    setup, record = setup_hash(config), SimpleNamespace(key=("r",), recipe="r", budget=1.0, steps=10, label="r")

    def trainer_here(config):  # this machine's trainer decodes in its own process
        trainer = fake_trainer(workers=0)
        trainer.train_loader.close = trainer.task.close = lambda: None
        return trainer

    def planned(workers):
        costs = StepCosts(machine="cpu x", threads=2, rounds=3, warmup=8, timed=32, kinds={},
                          setups={setup: SetupCost(setup, "cifar_mild", "bf16 autocast", 0.0, 0.0, 0.0, workers)})
        return plan_records([record], {record.key: config}, trainer_here, costs)[0][record.key]

    assert planned(2) == plan_run(fake_trainer(workers=2), setup) != plan_run(fake_trainer(workers=0), setup)
    # A pass from before they were recorded decoded with one worker per core, the default then.
    assert planned(None) == plan_run(fake_trainer(workers=default_num_workers()), setup)


@pytest.mark.parametrize("change, problem", [
    (lambda d: d["kinds"][0].update(kept_seconds=-1), r"kinds\[0\].kept_seconds must be a finite number of "
                                                       r"seconds > 0"),
    (lambda d: d["kinds"][0].update(image_size="16"), r"kinds\[0\].image_size must be an int"),
    (lambda d: d["kinds"][0]["methods"].append(7), r"kinds\[0\].methods\[0\] must be a string"),
    (lambda d: d["setups"][0].pop("setup_seconds"), r"setups\[0\] lacks 'setup_seconds'"),
    (lambda d: d["setups"][0].update(decoding_workers=-1), r"setups\[0\].decoding_workers must be >= 0"),
    (lambda d: d.update(threads=0), "threads must be >= 1"),
    (lambda d: d.update(library={"torch": 2}), "library.torch must be a string"),
])
def test_a_damaged_costs_file_is_refused_naming_it_and_the_field(tmp_path, change, problem):
    path = tmp_path / "costs.json"
    write_costs(_costs(), path)
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document))
    with pytest.raises(ValueError, match=f"{path}: {problem}"):
        read_costs(path)


@pytest.mark.parametrize("text", ["[" * 100_000, '{"machine": NaN}', "not json", '{"machine": "a", "machine": "b"}'])
def test_a_costs_file_that_is_no_json_object_is_refused(tmp_path, text):
    path = tmp_path / "costs.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=f"^{path}"):
        read_costs(path)


def test_a_run_whose_folder_is_gone_is_rebuilt_with_the_overrides_it_trained_with(tmp_path):
    trained = run_config(PlannedRun("cifar_mild", 0.5, 2, 0.0), ["methods.tta={}"])
    run = RunRecord.made_up("cifar_mild", 0.5, 2, config_hash=config_hash(trained))
    with pytest.raises(ValueError, match="pass the --set overrides it trained with"):
        record_config(run, [tmp_path])
    assert config_hash(record_config(run, [tmp_path], ["methods.tta={}"])) == run.config_hash
    plain = RunRecord.made_up("cifar_mild", 0.5, 2,
                              config_hash=config_hash(run_config(PlannedRun("cifar_mild", 0.5, 2, 0.0), ())))
    assert record_config(plain, [tmp_path], ["methods.tta={}"]).methods.tta is None  # as it trained: without
