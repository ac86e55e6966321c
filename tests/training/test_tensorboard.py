"""A run asked for TensorBoard event files writes them beside metrics.jsonl, readable by TensorBoard's own reader."""

import json

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from fastcore_ops.training import tensorboard_events
from fastcore_ops.training.train import main
from tests.training.test_train import QUICK, _finish, _run


def _scalars(out):
    events = EventAccumulator(str(out))
    events.Reload()
    return {tag: [(event.step, event.value) for event in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def test_a_run_writes_its_evaluations_as_tensorboard_scalars(micro_cifar, tmp_path):
    out = tmp_path / "run"
    code, stdout, stderr = _finish(_run(*QUICK, "--set", "data.batch_size=4", "--tensorboard",
                                        "--data", str(micro_cifar), "--out", str(out)))
    assert code == 0, stderr
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    scalars = _scalars(out)
    for tag in ("loss/train", "eval/eval_loss", "eval/top1", "train/lr", "train/samples_per_second",
                "time/train_seconds", "time/forward", "time/backward", "time/data", "time/optimizer"):
        assert [step for step, _ in scalars[tag]] == [row["step"] for row in rows], tag
    assert [value for _, value in scalars["eval/top1"]] == pytest.approx([row["top1"] for row in rows])
    assert [value for _, value in scalars["train/lr"]] == pytest.approx([row["lr"] for row in rows])
    assert "TensorBoard event files" in stdout.splitlines()[-1]


def test_a_resumed_run_drops_the_events_written_after_its_checkpoint(tmp_path):
    folder = tmp_path / "run"
    first = tensorboard_events.TensorBoardEvents(folder)
    for step in (10, 20, 30):
        first.write({"step": step, "top1": step / 100})
    first.close()
    resumed = tensorboard_events.TensorBoardEvents(folder, purge_after=20)
    resumed.write({"step": 30, "top1": 0.99})
    resumed.close()
    assert _scalars(folder)["eval/top1"] == [(10, pytest.approx(0.1)), (20, pytest.approx(0.2)),
                                             (30, pytest.approx(0.99))]


def test_without_the_package_the_flag_is_refused_before_anything_is_written(micro_cifar, tmp_path, capsys,
                                                                             monkeypatch):
    monkeypatch.setattr(tensorboard_events.importlib.util, "find_spec", lambda name: None)
    out = tmp_path / "run"
    assert main([*QUICK, "--tensorboard", "--data", str(micro_cifar), "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip() == ("error: --tensorboard: the tensorboard package is not installed; "
                                               "pip install tensorboard, or leave --tensorboard out")
    assert not out.exists()
