"""The sweep's bookkeeping with a stand-in for the train command: skip, resume, fail and go on, stop, refuse,
and never delete a file it did not write."""

import json
import os
import signal
from pathlib import Path

import pytest

from fastcore_ops.owned_folder import claim_folder
from fastcore_ops.training.config import to_dict
from fastcore_ops.training.tradeoff import sweep
from fastcore_ops.training.tradeoff.planning import (RUNS, PlannedRun, SweepPlan, SweepRequest, TrainOptions, Variant,
                                                     plan_sweep, planned_runs, run_config)
from fastcore_ops.training.tradeoff.sweep import SweepInterrupted, run_sweep, train_command
from tests.training.tradeoff import fakes

OPTIONS = TrainOptions(data=Path("/data"), device="cpu", machine="host/cpu", subset=5,
                       assignments=("data.batch_size=8",))


@pytest.fixture
def out(tmp_path):
    """A sweep's output folder, marked as the tradeoff tool's (as the command line marks it)."""
    claim_folder(tmp_path / "out", "tradeoff")
    return tmp_path / "out"


def _sweep(runs, out, **options):
    return run_sweep(SweepPlan(runs, out, OPTIONS, "cifar_baseline", progress=False), **options)


@pytest.fixture
def fake_train(monkeypatch):
    return fakes.install(monkeypatch)


PLAN = planned_runs(["cifar_baseline", "cifar_mild"], [1.0, 0.5], seeds=1, epochs={"cifar_baseline": 15.0,
                                                                                    "cifar_mild": 8.0})


def _folders(commands):
    return [Path(fakes.flag(c, "--out")).name for c in commands]


def test_the_plan_covers_every_recipe_budget_and_seed_in_units_of_budget_times_epochs_seed_by_seed():
    plan = planned_runs(["a", "b"], [2.0, 0.5], seeds=2, epochs={"a": 10.0, "b": 4.0})
    assert [(r.recipe, r.budget, r.seed, r.units) for r in plan] == [
        ("a", 0.5, 0, 5.0), ("a", 2.0, 0, 20.0), ("b", 0.5, 0, 2.0), ("b", 2.0, 0, 8.0),
        ("a", 0.5, 1, 5.0), ("a", 2.0, 1, 20.0), ("b", 0.5, 1, 2.0), ("b", 2.0, 1, 8.0)]
    assert plan[1].folder_name == "a-x2-s0"


def test_finished_runs_are_skipped_and_checkpointed_ones_resumed(fake_train, out):
    finished, stopped = out / RUNS / "cifar_baseline-x0.5-s0", out / RUNS / "cifar_mild-x0.5-s0"
    finished.mkdir(parents=True)
    (finished / "summary.json").write_text("{}")
    stopped.mkdir()
    (stopped / "checkpoint.pt").write_bytes(b"")
    seen = []
    _sweep(PLAN, out, on_finished=lambda run, folder, code: seen.append((run.folder_name, code)))
    assert _folders(fake_train.commands) == ["cifar_baseline-x1-s0", "cifar_mild-x0.5-s0", "cifar_mild-x1-s0"]
    assert ["--resume" in c for c in fake_train.commands] == [False, True, False]
    assert seen == [("cifar_baseline-x0.5-s0", None), ("cifar_baseline-x1-s0", 0),
                    ("cifar_mild-x0.5-s0", 0), ("cifar_mild-x1-s0", 0)]
    assert (out / RUNS / "cifar_mild-x1-s0" / "machine.txt").read_text().strip() == "host/cpu"
    # A second pass finds everything finished and trains nothing.
    fake_train.commands.clear()
    _sweep(PLAN, out)
    assert fake_train.commands == []


LEFTOVERS = ("config.json", "run.json", "metrics.jsonl", "curves.png", "tokens.json", "tokenizer.json")


def _unstarted_run(out):
    """A run folder left by a run killed before its first checkpoint, with a file of the user's beside."""
    unstarted = out / RUNS / "cifar_baseline-x0.5-s0"
    unstarted.mkdir(parents=True)
    for name in (*LEFTOVERS, "notes.txt"):
        (unstarted / name).write_text("{}")
    return unstarted


def test_a_run_stopped_before_its_first_checkpoint_starts_afresh_and_only_its_own_files_go(fake_train, out):
    unstarted = _unstarted_run(out)
    _sweep(PLAN[:1], out)
    assert "--resume" not in fake_train.commands[0]
    assert not any((unstarted / name).exists() for name in LEFTOVERS if name != "config.json")
    assert (unstarted / "config.json").read_text() != "{}"  # the new run's own
    assert (unstarted / "notes.txt").read_text() == "{}"  # not a name a run writes: never deleted


def test_nothing_is_deleted_in_a_folder_the_sweep_does_not_own(fake_train, tmp_path):
    unstarted = _unstarted_run(tmp_path)  # no .fastcore_ops-tradeoff: not provably the sweep's
    fake_train.on_wait = lambda child: 2  # as train refuses a folder holding a run's files
    _sweep(PLAN[:1], tmp_path)
    assert all((unstarted / name).read_text() == "{}" for name in (*LEFTOVERS, "notes.txt"))


def test_every_run_gets_the_shared_options_and_never_the_triton_interpreter(fake_train, out, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    _sweep(PLAN[:1], out)
    child, = fake_train.instances
    assert "TRITON_INTERPRET" not in child.env and child.env["FASTCORE_OPS_INTERPRET"] == "0"
    command = fake_train.commands[0]
    pairs = dict(zip(command[3::2], command[4::2]))
    assert command[1:3] == ["-m", "fastcore_ops.training.train"] and "--no-progress" in command
    assert pairs["--recipe"] == "cifar_baseline" and pairs["--budget"] == "0.5" and pairs["--seed"] == "0"
    assert command[command.index("--subset") + 1] == "5"
    assert command[command.index("--set") + 1] == "data.batch_size=8"
    assert command[command.index("--device") + 1] == "cpu"


def test_a_failed_run_is_tried_once_and_the_sweep_goes_on_naming_its_error_and_log(fake_train, out):
    fake_train.default = fakes.FAIL
    outcomes = []
    _sweep(PLAN, out, on_finished=lambda run, folder, code: outcomes.append(sweep.read_outcome(run, folder, code)))
    assert len(fake_train.commands) == len(PLAN)  # every run tried, each once
    first = outcomes[0]
    assert (first.status, first.label) == ("failed", "cifar_baseline x0.5 seed 0")
    assert first.reason == "training exited with code 1: RuntimeError: boom"
    assert first.log == str(out / RUNS / "cifar_baseline-x0.5-s0" / "train.stderr.log")
    # Rerunning the same command tries the failed runs again.
    fake_train.default = fakes.FINISH
    _sweep(PLAN, out)
    assert len(fake_train.commands) == 2 * len(PLAN)


def test_a_stop_signal_is_passed_to_the_run_and_ends_the_sweep_with_how_to_resume(fake_train, out):
    children = []

    def interrupted(child):
        children.append(child)
        os.kill(os.getpid(), signal.SIGTERM)  # the sweep's handler passes it on to the child
        return 128 + signal.SIGTERM

    fake_train.on_wait = interrupted
    handler_before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SweepInterrupted, match="rerun the same command") as stop:
        _sweep(PLAN, out)
    assert stop.value.signal_number == signal.SIGTERM
    assert children[0].signals == [signal.SIGTERM] and len(fake_train.commands) == 1
    assert signal.getsignal(signal.SIGTERM) == handler_before  # the handler was put back


def test_a_stop_signal_between_two_runs_starts_no_other(fake_train, out):
    def stop_after_the_first(run, folder, code):
        os.kill(os.getpid(), signal.SIGTERM)  # while the sweep reads the finished run, no child running

    with pytest.raises(SweepInterrupted, match="before cifar_baseline-x1-s0; rerun the same command"):
        _sweep(PLAN, out, on_finished=stop_after_the_first)
    assert _folders(fake_train.commands) == ["cifar_baseline-x0.5-s0"]


def test_a_finished_run_with_another_configuration_is_refused(out):
    run = PlannedRun("gpt_baseline", 0.5, 0, 4.0)
    folder = out / RUNS / run.folder_name
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text("{}")
    (folder / "config.json").write_text(json.dumps(to_dict(run_config(run, ["text.sequence_length=64"]))))

    def planned(assignments):
        request = SweepRequest(["gpt_baseline"], [0.5], 1, None, None, "cpu", assignments, out, "gpt_baseline")
        return [planned_run.folder_name for planned_run in plan_sweep(request).runs]

    assert planned(["text.sequence_length=64"]) == [run.folder_name]  # the same: accepted
    with pytest.raises(ValueError, match="another configuration"):
        planned(["text.sequence_length=32"])


def test_a_sweep_without_data_lets_each_run_use_its_recipe_s_own_text():
    options = TrainOptions(data=None, device="cpu", machine="host/cpu")
    command = train_command(PlannedRun("gpt_baseline", 1.0, 0, 0.5), Path("runs/x"), options, resume=False)
    assert "--data" not in command and command[command.index("--recipe") + 1] == "gpt_baseline"


def test_a_variant_trains_its_recipe_with_its_own_settings_before_the_sweep_s():
    variant = Variant("cifar_mild+cutout", "cifar_mild", ("methods.cutout={}",))
    (run,) = planned_runs([variant], [0.5], seeds=1, epochs={"cifar_mild+cutout": 14.0})
    assert run.folder_name == "cifar_mild+cutout-x0.5-s0" and run.units == 7.0
    options = TrainOptions(data=Path("data"), device="cpu", machine="host/cpu", assignments=("data.batch_size=8",))
    command = train_command(run, Path("runs/x"), options, resume=False)
    assert command[command.index("--recipe") + 1] == "cifar_mild"
    assert [command[i + 1] for i, arg in enumerate(command) if arg == "--set"] == ["methods.cutout={}",
                                                                                  "data.batch_size=8"]
    config = run_config(run, ["data.batch_size=8"])
    assert config.methods.cutout is not None and config.data.batch_size == 8


