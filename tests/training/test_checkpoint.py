"""Checkpoint files: safe to load, checked against their checksum, written atomically, kept K deep."""

import errno
import hashlib
import io
import os
import random
import re

import numpy as np
import pytest
import torch

from fastcore_ops.training import checkpoint
from fastcore_ops.training.checkpoint import CheckpointError, load, load_newest, save_atomic, save_keeping

MARKER_NAME = "code-ran.txt"


def _write_marker(path):
    """Stands for any code a crafted checkpoint would run: it leaves a file behind."""
    with open(path, "w") as file:
        file.write("ran")


class _RunsCode:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return _write_marker, (str(self.marker),)


def _crafted_body(marker) -> bytes:
    buffer = io.BytesIO()
    torch.save({"model": {}, "step": 1, "format_version": 1, "payload": _RunsCode(marker)}, buffer)
    return buffer.getvalue()


@pytest.mark.parametrize("with_header", [False, True], ids=["plain-torch-save", "forged-header-and-checksum"])
def test_a_crafted_checkpoint_runs_no_code_and_is_refused(tmp_path, with_header):
    marker = tmp_path / MARKER_NAME
    body = _crafted_body(marker)
    if with_header:
        body = f"fastcore_ops checkpoint v1 sha256={hashlib.sha256(body).hexdigest()}\n".encode() + body
    path = tmp_path / "checkpoint.pt"
    path.write_bytes(body)
    with pytest.raises(CheckpointError, match=f"{path} is not a fastcore_ops checkpoint"):
        load(path)
    assert not marker.exists(), "loading the checkpoint ran code"


def test_a_checksummed_body_that_is_not_a_torch_file_is_refused(tmp_path):
    body = b"not a zip archive"
    path = tmp_path / "checkpoint.pt"
    path.write_bytes(f"fastcore_ops checkpoint v1 sha256={hashlib.sha256(body).hexdigest()}\n".encode() + body)
    with pytest.raises(CheckpointError, match="is not a fastcore_ops checkpoint: its payload is not a torch.save archive"):
        load(path)


def _payload():
    return {"model": {"weight": torch.arange(4096, dtype=torch.float32)}, "step": 7, "rng": checkpoint.rng_states()}


def test_a_checkpoint_round_trips_with_its_rng_states_as_plain_data(tmp_path):
    path = tmp_path / "checkpoint.pt"
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    save_atomic(_payload(), path)
    expected = (random.random(), np.random.rand(), torch.rand(1))
    random.seed(9), np.random.seed(9), torch.manual_seed(9)
    loaded = load(path)
    checkpoint.restore_rng_states(loaded["rng"])
    assert (random.random(), np.random.rand(), torch.rand(1)) == expected
    assert loaded["step"] == 7 and torch.equal(loaded["model"]["weight"], _payload()["model"]["weight"])
    assert path.read_bytes().startswith(b"fastcore_ops checkpoint v1 sha256=")


def _flip_bytes(data: bytes, count: int, start: int) -> bytes:
    damaged = bytearray(data)
    for offset in range(start, start + count):
        damaged[offset] ^= 0xFF
    return bytes(damaged)


@pytest.mark.parametrize("damage, message", [
    (lambda data: _flip_bytes(data, 50, len(data) // 2), "is corrupted: its contents do not match their sha256"),
    (lambda data: data[: len(data) // 2], "is corrupted: its contents do not match their sha256"),
    (lambda data: b"", "is not a fastcore_ops checkpoint: the file is empty"),
    (lambda data: data[:20], "is not a fastcore_ops checkpoint (no fastcore_ops header)"),
], ids=["50-flipped-weight-bytes", "truncated", "empty", "cut-in-header"])
def test_a_damaged_checkpoint_gives_one_clear_error_naming_the_file(tmp_path, damage, message):
    path = tmp_path / "checkpoint.pt"
    save_atomic(_payload(), path)
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(CheckpointError) as error:
        load(path)
    assert str(path) in str(error.value) and message in str(error.value)


def _full_disk(data, target):
    """A write of a checkpoint that fills the disk part way."""
    with open(target, "wb") as file:
        file.write(data[:10])
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_full_disk_keeps_the_previous_checkpoint_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "checkpoint.pt"
    save_atomic({"step": 1}, path)
    monkeypatch.setattr(checkpoint, "_write_synced", _full_disk)
    for save in (save_atomic, lambda payload, target: save_keeping(payload, target, keep=2)):
        with pytest.raises(CheckpointError, match=f"no space left on device while writing checkpoint {path}; "
                                                  f"the previous checkpoint is intact"):
            save({"step": 2}, path)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.pt"]
        assert load(path)["step"] == 1


def test_the_newest_k_checkpoints_are_kept_and_a_damaged_newest_falls_back_with_a_warning(tmp_path):
    path = tmp_path / "checkpoint.pt"
    for step in range(1, 5):
        save_keeping({"step": step}, path, keep=3)
    assert [load(p)["step"] for p in checkpoint.existing(path)] == [4, 3, 2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.1.pt", "checkpoint.2.pt", "checkpoint.pt"]
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.warns(UserWarning, match=f"checkpoint {path} is corrupted.*resuming from the older .*checkpoint.1.pt"):
        assert load_newest(path)["step"] == 3


def test_a_kill_while_the_files_move_up_still_finds_the_newest_complete_checkpoint(tmp_path):
    path = tmp_path / "checkpoint.pt"
    save_keeping({"step": 1}, path, keep=2)
    os.replace(path, checkpoint.older(path, 1))  # the instant between moving the newest up and renaming the new one
    assert load_newest(path)["step"] == 1


def test_every_method_state_loads_with_weights_only(tmp_path):
    """EMA's and SWA's averaged models, MixUp's generator: tensors and plain containers only."""
    from fastcore_ops.training.methods import EMA, SWA, MixUp
    from fastcore_ops.training.methods.base import TrainState

    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.BatchNorm1d(3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    state = TrainState(model=model, optimizer=optimizer, scaler=torch.amp.GradScaler("cpu", enabled=False),
                       device=torch.device("cpu"), num_classes=3, steps_per_epoch=2, total_steps=4)
    methods = [EMA(half_life_steps=2), SWA(start_fraction=0.0, end_fraction=1.0, swa_lr=0.05), MixUp(0.2, seed=0)]
    for method in methods:
        method.on_fit_start(state)
        method.on_epoch_end(state)
    path = tmp_path / "checkpoint.pt"
    save_atomic({type(m).__name__: m.state_dict() for m in methods}, path)
    loaded = load(path)
    assert loaded["SWA"]["averaged_model"] and loaded["EMA"]["averaged_model"] and "generator" in loaded["MixUp"]


def _linear_trainer():
    """A Trainer of a 2x2 linear model: 4 batches an epoch, 8 steps; its loader holds no data."""
    from fastcore_ops.training.tasks.classification import ImageClassification
    from fastcore_ops.training.trainer import Trainer

    model = torch.nn.Linear(2, 2)
    task = ImageClassification(eval_loader=[], num_classes=2, loss_fn=torch.nn.functional.cross_entropy,
                               device=torch.device("cpu"))
    return Trainer(model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1), task=task,
                   train_loader=[None] * 4, total_steps=8, device=torch.device("cpu"), progress=False)


def test_without_a_step_interval_a_run_checkpoints_every_ten_minutes_of_training_within_an_epoch():
    trainer = _linear_trainer()
    assert trainer.checkpoint_policy == checkpoint.CheckpointPolicy(every_steps=None, every_seconds=600.0, keep=2)
    trainer.state.step = trainer.batch_in_epoch = 1
    assert not trainer._checkpoint_due()
    trainer.last_checkpoint_time -= 601
    assert trainer._checkpoint_due()
    trainer.state.step = trainer.batch_in_epoch = 4  # the epoch's end saves anyway
    assert not trainer._checkpoint_due()


def test_every_rank_checkpoints_at_the_step_where_any_rank_is_due(monkeypatch):
    """Each rank's clock passes ten minutes at a step of its own; a sharded model's checkpoint needs them all."""
    from fastcore_ops.training import trainer as trainer_module

    trainer = _linear_trainer()
    trainer.state.step = trainer.batch_in_epoch = 1
    stops = checkpoint.StopRequests()
    assert trainer._stop_and_checkpoint(stops) == (False, False)  # one process, its clock not yet due

    def other_rank_is_due(flags, op):  # what all_reduce(MAX) makes of ours and a rank whose clock is due
        flags.copy_(torch.maximum(flags, torch.tensor([0, 1], dtype=flags.dtype)))

    monkeypatch.setattr(trainer_module, "_distributed", lambda: True)
    monkeypatch.setattr(trainer_module.dist, "all_reduce", other_rank_is_due)
    assert trainer._stop_and_checkpoint(stops) == (False, True)


def _trainer_payload() -> dict:
    """The payload a run's checkpoint holds, as the trainer builds it (a tiny model, not trained)."""
    from fastcore_ops.training.tasks.classification import ImageClassification
    from fastcore_ops.training.trainer import Trainer

    model = torch.nn.Linear(2, 2)
    task = ImageClassification(eval_loader=[], num_classes=2, loss_fn=torch.nn.functional.cross_entropy,
                               device=torch.device("cpu"))
    trainer = Trainer(model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1), task=task,
                      train_loader=[None] * 4, total_steps=8, device=torch.device("cpu"), progress=False)
    return trainer._checkpoint_payload(final=None)


def test_the_run_layout_lists_every_field_the_trainer_saves(tmp_path):
    payload = _trainer_payload()
    layout = checkpoint.RUN_LAYOUT
    assert set(payload) == set(layout.fields) | set(layout.added_later)
    path = tmp_path / "checkpoint.pt"
    save_atomic(payload, path)
    assert load(path, layout)["step"] == 0


@pytest.mark.parametrize("change, message", [
    (lambda payload: payload.pop("model"), "its payload lacks 'model'"),
    (lambda payload: payload.update(step="3"), "its 'step' is a str, not int"),
    (lambda payload: payload.update(step=True), "its 'step' is a bool, not int"),
    (lambda payload: payload.update(final=0.5), "its 'final' is a float, not dict or None"),
    (lambda payload: payload.update(compile_seconds="1"), "its 'compile_seconds' is a str, not int or float"),
    (lambda payload: payload.update(steps_by_threads={"2": -1}), "its 'steps_by_threads' is not a dict of names"),
    (lambda payload: payload.update(steps_by_threads={"2": True}), "its 'steps_by_threads' is not a dict of names"),
], ids=["no-model", "step-a-str", "step-a-bool", "final-a-float", "compile-seconds-a-str", "negative-count",
        "count-a-bool"])
def test_a_checksummed_payload_lacking_a_field_or_mistyping_one_is_not_a_checkpoint(change, message, tmp_path):
    payload = _trainer_payload()
    change(payload)
    path = tmp_path / "checkpoint.pt"
    save_atomic(payload, path)  # a correct header and sha256
    with pytest.raises(CheckpointError, match=re.escape(f"{path} is not a fastcore_ops checkpoint: {message}")):
        load_newest(path, checkpoint.RUN_LAYOUT)


def test_a_checkpoint_from_before_a_field_was_added_still_loads(tmp_path):
    payload = _trainer_payload()
    del payload["compile_seconds"]
    path = tmp_path / "checkpoint.pt"
    save_atomic(payload, path)
    assert "compile_seconds" not in load(path, checkpoint.RUN_LAYOUT)


def test_a_full_disk_during_the_first_checkpoint_says_there_is_no_earlier_one(tmp_path, monkeypatch):
    path = tmp_path / "checkpoint.pt"
    (tmp_path / "notes.txt").write_text("mine")

    monkeypatch.setattr(checkpoint, "_write_synced", _full_disk)
    for save in (save_atomic, lambda payload, target: save_keeping(payload, target, keep=2)):
        with pytest.raises(CheckpointError) as error:
            save({"step": 1}, path)
        assert str(error.value) == (f"no space left on device while writing checkpoint {path}; it was the first one "
                                    f"there, so there is no earlier checkpoint to resume from")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
