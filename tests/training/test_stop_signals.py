"""Stopping a whole job: SIGTERM or SIGINT to the process group, to the training process or to one of its
decoding workers, alone and under torchrun: a checkpoint, exit 128 + the signal, no process left behind,
and ``--resume`` goes on from the checkpoint."""

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fastcore_ops.training import checkpoint
from fastcore_ops.training.checkpoint import StopRequests
from fastcore_ops.training.train import child_environment
from tests.hang_guard import HANG_GUARD_S, descendants, processes
from tests.training.test_train import HELD, _wait_for_mid_epoch_checkpoint

ROOT = Path(__file__).resolve().parents[2]  # the repository: python -m fastcore_ops.training.train runs from here

# micro_cifar's 20 images in batches of 4: 5 steps an epoch, 15 in all, each checkpointed; two decoding workers.
EPOCHS, STEPS_PER_EPOCH = 3, 5
RUN = ["--recipe", "cifar_baseline", "--epochs", str(EPOCHS), "--set", "data.num_workers=2", "--checkpoint-every", "1",
       "--eval-every", "0", "--no-progress"]
ONE_PROCESS = [*RUN, "--set", "data.batch_size=4"]
TWO_PROCESSES = [*RUN, "--set", "data.batch_size=2"]  # each rank has half the images: 5 steps an epoch too
TORCHRUN = ["-m", "fastcore_ops.training.torchrun", "--standalone", "--nproc_per_node=2", "-m", "fastcore_ops.training.train"]


@pytest.fixture
def start():
    """``start(command)``: ``python <command>`` in a process group of its own (the one a scheduler signals).

    What a failed test leaves running is killed at its end.
    """
    started = []

    def launch(command: list[str]) -> subprocess.Popen:
        process = subprocess.Popen([sys.executable, *command], cwd=ROOT, env=child_environment(OMP_NUM_THREADS="1"),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        started.append(process)
        return process

    yield launch
    for process in started:
        for pid in [*descendants(process.pid), process.pid] if process.poll() is None else []:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _finish(process, timeout=HANG_GUARD_S) -> tuple[int, str]:
    _, err = process.communicate(timeout=timeout)
    return process.returncode, err


def _still_there(started: dict[int, tuple[str, str]]) -> list[str]:
    """Those of ``started`` (:func:`descendants`) that still exist (as zombies too): the same pid and start time."""
    now = processes()
    return [f"{pid} {name}" for pid, (start, name) in started.items() if now.get(pid, (0, None))[1] == start]


def _decoding_workers(pid: int) -> list[int]:
    return sorted(child for child, (_, name) in descendants(pid).items() if name == "pt_data_worker")


SEND = {
    "group": lambda process, number: os.killpg(process.pid, number),
    "main": lambda process, number: process.send_signal(number),
    "worker": lambda process, number: os.kill(_decoding_workers(process.pid)[0], number),
}


def _stop(start, to: str, number: int, data: Path, out: Path) -> None:
    """Start a run, send stop signal ``number`` ``to`` (SEND) after its first checkpoint: the run checkpoints,
    says so once, exits 128 + ``number`` and leaves no process behind."""
    process = start(["-m", "fastcore_ops.training.train", *ONE_PROCESS, *HELD, "--data", str(data), "--out", str(out)])
    seen = _wait_for_mid_epoch_checkpoint(out, process, within_epoch=False)
    started = descendants(process.pid)
    assert len(_decoding_workers(process.pid)) == 2
    SEND[to](process, number)
    code, stderr = _finish(process)
    assert code == 128 + number, stderr
    assert stderr.count(f"stopped by signal {number} at step") == 1 and "Traceback" not in stderr, stderr
    saved = checkpoint.load(out / checkpoint.CHECKPOINT_NAME)
    assert saved["final"] is None and seen["step"] <= saved["step"] < EPOCHS * STEPS_PER_EPOCH
    assert _still_there(started) == [], "the decoding workers were let go and reaped"


def test_a_sigterm_to_the_process_group_checkpoints_leaves_no_process_and_the_run_resumes(start, micro_cifar, tmp_path):
    # What Slurm, systemd and kill -- -PGID send: the workers got it too, died, and the run hung.
    out = tmp_path / "run"
    _stop(start, "group", signal.SIGTERM, micro_cifar, out)
    code, stderr = _finish(start(["-m", "fastcore_ops.training.train", "--resume", "--no-progress", "--data", str(micro_cifar),
                                   "--out", str(out)]))
    assert code == 0, stderr
    assert json.loads((out / "summary.json").read_text())["steps"] == EPOCHS * STEPS_PER_EPOCH


@pytest.mark.parametrize("to, number", [("group", signal.SIGINT), ("main", signal.SIGTERM), ("main", signal.SIGINT),
                                        ("worker", signal.SIGTERM), ("worker", signal.SIGINT)],
                         ids=["group-INT", "main-TERM", "main-INT", "worker-TERM", "worker-INT"])
def test_a_stop_signal_to_the_group_the_process_or_a_worker_checkpoints_and_leaves_no_process(to, number, start,
                                                                                              micro_cifar, tmp_path):
    # The checkpoint is the one a SIGTERM to the group writes, which the test above resumes.
    _stop(start, to, number, micro_cifar, tmp_path / "run")


def test_a_torchrun_job_stopped_by_sigterm_to_its_group_checkpoints_exits_143_and_resumes(start, micro_cifar,
                                                                                          tmp_path):
    # torchrun starts each rank in a process group of its own and passes the signal on to each group
    # (the rank and its decoding workers): each rank hears it from torchrun and from both workers.
    out = tmp_path / "ddp"
    process = start([*TORCHRUN, *TWO_PROCESSES, *HELD, "--data", str(micro_cifar), "--out", str(out)])
    _wait_for_mid_epoch_checkpoint(out, process, within_epoch=False)
    started = descendants(process.pid)
    assert sum(name == "pt_data_worker" for _, name in started.values()) == 4, started
    os.killpg(process.pid, signal.SIGTERM)
    code, stderr = _finish(process)
    assert code == 128 + signal.SIGTERM, stderr[-3000:]
    assert stderr.count("stopped by signal 15 at step") == 1 and "Traceback" not in stderr, stderr[-3000:]
    assert checkpoint.load(out / checkpoint.CHECKPOINT_NAME)["final"] is None
    assert _still_there(started) == []
    code, stderr = _finish(start([*TORCHRUN, "--resume", "--no-progress", "--data", str(micro_cifar),
                                   "--out", str(out)]))
    assert code == 0, stderr[-3000:]
    assert json.loads((out / "summary.json").read_text())["steps"] == EPOCHS * STEPS_PER_EPOCH


def test_a_stop_arriving_again_within_moments_is_the_same_request_and_later_forces_the_exit(monkeypatch):
    clock = iter([100.0, 100.0 + StopRequests.ECHO_SECONDS / 2, 100.0 + StopRequests.ECHO_SECONDS])
    monkeypatch.setattr(checkpoint.time, "monotonic", lambda: next(clock))
    with StopRequests() as stops:
        stops._handle(signal.SIGTERM, None)  # the process group's
        stops._handle(signal.SIGTERM, None)  # passed on by torchrun or a decoding worker: the same stop
        assert stops.requested == signal.SIGTERM
        with pytest.raises(KeyboardInterrupt):
            stops._handle(signal.SIGINT, None)  # a Ctrl-C seconds later: now
