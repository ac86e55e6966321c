"""``python -m fastcore_ops.training.train`` end to end on real CIFAR-10 images: learning, outputs, errors, kill and resume, DDP."""

import errno
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from fastcore_ops.data.prepare import PrepareSettings
from fastcore_ops.data.shard_writer import prepare_shards
from fastcore_ops.training import checkpoint, launch, session
from fastcore_ops.training.config import override, to_dict
from fastcore_ops.training.metrics import MetricsLog
from fastcore_ops.training.recipes import get_recipe
from fastcore_ops.training.request import checked_request
from fastcore_ops.training.train import child_environment, main, parse_args
from tests.hang_guard import HANG_GUARD_S, descendants, run_guarded, still_running

ROOT = Path(__file__).resolve().parents[2]  # the repository: python -m fastcore_ops.training.train runs from here

# Small and quick: 600 training images, batch 32 (so LR 0.2: the run scales the recipe's 0.8 from
# its batch 128), three epochs; the references (not the interpreter) run the kernels so that the
# subprocesses train at full CPU speed.
QUICK = ["--recipe", "cifar_baseline", "--epochs", "3", "--set", "data.batch_size=32",
         "--set", "data.num_workers=1", "--set", "schedule.warmup_epochs=0.5", "--no-progress"]


def _run(*args, **popen):
    environment = child_environment()
    return subprocess.Popen([sys.executable, "-m", "fastcore_ops.training.train", *args], cwd=ROOT, env=environment,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def _finish(process, timeout=HANG_GUARD_S):
    out, err = process.communicate(timeout=timeout)
    return process.returncode, out, err


def _summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


@pytest.fixture(scope="module")
def reference_run(tiny_cifar, tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "reference"
    code, stdout, stderr = _finish(_run(*QUICK, "--data", str(tiny_cifar), "--out", str(out)))
    assert code == 0, stderr
    return out, stdout


def test_a_short_run_learns_and_writes_every_output(reference_run):
    out, stdout = reference_run
    summary = _summary(out)
    assert summary["metrics"]["top1"] > 0.2, "three epochs on 600 images should beat chance (10%) clearly"
    assert summary["steps"] == 3 * (600 // 32)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [row["epoch"] for row in rows] == [1, 2, 3]
    said = [line for line in stdout.splitlines() if line.startswith("epoch ")]
    assert [line.split(":")[0] for line in said] == ["epoch 1/3", "epoch 2/3", "epoch 3/3"], "a line an evaluation"
    assert f"top-1 {100 * rows[-1]['top1']:.2f}%, evaluation loss {rows[-1]['eval_loss']:.4f}" in said[-1]
    assert said[-1].endswith(f"{rows[-1]['train_seconds']:.1f} s of training")
    assert rows[-1]["train_seconds"] == pytest.approx(summary["train_seconds"])
    assert (out / "curves.png").stat().st_size > 10_000
    assert json.loads((out / "config.json").read_text())["schedule"]["epochs"] == 3.0
    assert "top-1" in stdout and "images/s" in stdout and "train time" in stdout
    assert "computing with" in stdout, "the run says how many threads it computes with"
    assert "decoding: pil, worker processes: 1" in stdout, "the run says where it decodes (QUICK sets one worker)"
    assert "precision: " in stdout and "(precision=amp" in stdout, "the run says its precision, and why"
    assert stdout.rstrip().endswith(f"in {out}: config.json, run.json, metrics.jsonl, summary.json, curves.png, "
                                    f"checkpoint.pt"), "its last line says where everything went"
    assert f"precision: {summary['precision']} (" in stdout, "the summary records what amp resolved to here"
    assert summary["eval_seconds"] > 0, "the final evaluation's time (TTA's cost shows there)"
    threads = re.search(r"computing with (\d+) thread", stdout)[1]
    assert summary["steps_by_threads"] == {threads: summary["steps"]}, "every step at the count it says"


def test_training_reads_prepared_shards_as_it_reads_image_folders(micro_cifar, tmp_path):
    for split in ("train", "test"):
        prepare_shards(micro_cifar / split, tmp_path / "prepared" / split, PrepareSettings(max_side=32, shard_size=8),
                       workers=1, progress=False)
    out = tmp_path / "run"
    code, _, stderr = _finish(_run("--recipe", "cifar_baseline", "--epochs", "1", "--set", "data.batch_size=4",
                                   "--set", "data.num_workers=1", "--no-progress", "--data", str(tmp_path / "prepared"),
                                   "--out", str(out)))
    assert code == 0, stderr
    summary = _summary(out)
    assert summary["steps"] == 20 // 4 and 0 <= summary["metrics"]["top1"] <= 1


# cifar_hot draws from every random source a run has (stochastic depth from the global RNG,
# MixUp, RandAugment, ColOut, SAM's second pass, EMA), on 20 images: 5 steps an epoch, a
# checkpoint every 2 steps, DataLoader workers on (the recipe's default), seconds per run.
EVERY = 2
HOT = ["--recipe", "cifar_hot", "--epochs", "2", "--set", "data.batch_size=4", "--checkpoint-every", str(EVERY),
       "--no-progress"]
TIMING_FIELDS = ("train_seconds", "samples_per_second", "phase_seconds")


@pytest.fixture(scope="module")
def hot_reference(micro_cifar, tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "hot"
    code, _, stderr = _finish(_run(*HOT, "--data", str(micro_cifar), "--out", str(out)))
    assert code == 0, stderr
    return out


# For a run a test stops after its first checkpoint: it holds after that one until a stop signal arrives
# (tests/training/stop_gate.py), so the run cannot end before the signal is sent.
HELD = ["--import", "tests.training.stop_gate"]


def _wait_for_mid_epoch_checkpoint(out: Path, process, timeout=HANG_GUARD_S, *, within_epoch=True) -> dict:
    """The first checkpoint written within an epoch (the process keeps running); any before the last
    with ``within_epoch=False``. A run started with ``HELD`` holds after its first checkpoint."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()[1]
        try:
            payload = checkpoint.load(out / checkpoint.CHECKPOINT_NAME)
        except (FileNotFoundError, checkpoint.CheckpointError):  # not written yet, or mid-rename
            payload = None
        if payload is not None and payload["final"] is None and (payload["batch_in_epoch"] % 5 or not within_epoch):
            return payload
        time.sleep(0.02)
    raise AssertionError(f"no mid-epoch checkpoint in {out} after {timeout} s")


def _metrics(out: Path) -> list[dict]:
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if k not in TIMING_FIELDS} for row in rows]


def _assert_same_run(out: Path, reference: Path) -> None:
    """Bit-identical weights (the model's and every method's) and equal metrics."""
    resumed, expected = (checkpoint.load(folder / checkpoint.CHECKPOINT_NAME) for folder in (out, reference))
    assert resumed["step"] == expected["step"]
    for part in ("model", "methods"):
        tensors = torch.utils._pytree.tree_flatten(resumed[part])[0]
        reference_tensors = torch.utils._pytree.tree_flatten(expected[part])[0]
        assert len(tensors) == len(reference_tensors)
        for got, want in zip(tensors, reference_tensors):
            assert torch.equal(got, want) if isinstance(want, torch.Tensor) else got == want, part
    assert _metrics(out) == _metrics(reference)
    summary, reference_summary = _summary(out), _summary(reference)
    assert (summary["metrics"], summary["steps"]) == (reference_summary["metrics"], reference_summary["steps"])


def test_a_run_killed_after_a_mid_epoch_checkpoint_resumes_bit_identical(hot_reference, micro_cifar, tmp_path):
    out = tmp_path / "killed"
    process = _run(*HOT, *HELD, "--data", str(micro_cifar), "--out", str(out))
    _wait_for_mid_epoch_checkpoint(out, process)
    workers = list(descendants(process.pid))
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert still_running(workers) == [], "the killed run's decoding workers leave with it"
    assert not (out / "summary.json").exists()
    saved_steps = [checkpoint.load(path)["step"] for path in checkpoint.existing(out / checkpoint.CHECKPOINT_NAME)]
    assert saved_steps and all(0 < a - b <= EVERY for a, b in zip(saved_steps, saved_steps[1:])), \
        "a checkpoint every EVERY steps (and at each epoch's end): a kill loses at most EVERY steps"
    code, _, stderr = _finish(_run("--resume", "--no-progress", "--data", str(micro_cifar), "--out", str(out)))
    assert code == 0, stderr
    _assert_same_run(out, hot_reference)
    # A kill mid-write leaves a partial checkpoint.pt.tmp; the resumed run's next save replaces it.
    assert not list(out.glob("*.tmp"))


def test_sigterm_checkpoints_mid_epoch_and_the_resumed_run_is_bit_identical(hot_reference, micro_cifar, tmp_path):
    out = tmp_path / "terminated"
    process = _run(*HOT, *HELD, "--data", str(micro_cifar), "--out", str(out))
    _wait_for_mid_epoch_checkpoint(out, process)
    process.send_signal(signal.SIGTERM)
    code, _, stderr = _finish(process)
    assert code == 128 + signal.SIGTERM and "--resume" in stderr
    code, stdout, stderr = _finish(_run("--resume", "--data", str(micro_cifar), "--out", str(out)))
    assert code == 0, stderr
    _assert_same_run(out, hot_reference)
    assert re.search(r"resuming from step \d+ of \d+ \(epoch \d+, batch \d+\)", stdout), "a resumed run says so"
    assert "evaluation" in stderr, "evaluation has a progress bar"
    code, stdout, _ = _finish(_run("--resume", "--no-progress", "--data", str(micro_cifar), "--out", str(out)))
    assert code == 0 and "the run had finished" in stdout
    summary = _summary(out)
    assert sum(summary["steps_by_threads"].values()) == summary["steps"], "the steps before the stop are counted too"


def test_a_run_evaluating_at_its_end_says_each_epoch_and_draws_its_curves_only_then(micro_cifar, tmp_path,
                                                                                     monkeypatch, capsys):
    # Such a run (every sweep's) printed nothing until its end, and drew curves.png with empty axes at each epoch.
    rows_when_drawn = []
    drawn = MetricsLog.plot
    monkeypatch.setattr(MetricsLog, "plot", lambda log: rows_when_drawn.append(len(log.rows)) or drawn(log))
    # The baseline, not HOT: in this process its kernels would run through Triton's interpreter (97 s in CI).
    run = ["--recipe", "cifar_baseline", "--epochs", "2", "--set", "data.batch_size=4", "--set", "data.num_workers=0",
           "--no-progress", "--eval-every", "0"]
    assert main([*run, "--data", str(micro_cifar), "--out", str(tmp_path / "run")]) == 0
    assert rows_when_drawn == [1], "drawn once, with the one evaluation, at the end"
    said = [line for line in capsys.readouterr().out.splitlines() if line.startswith("epoch ")]
    assert len(said) == 2 and re.fullmatch(r"epoch 1/2: training loss \d+\.\d{4}, \d+\.\d s of training", said[0])
    assert said[1].startswith("epoch 2/2: top-1 "), said


def test_two_processes_train_with_ddp_on_the_cpu(tiny_cifar, tmp_path):
    out = tmp_path / "ddp"
    environment = child_environment(OMP_NUM_THREADS="1")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
               "-m", "fastcore_ops.training.train", *QUICK, "--epochs", "1", "--data", str(tiny_cifar), "--out", str(out)]
    finished = run_guarded(command, cwd=ROOT, env=environment)
    assert finished.returncode == 0, finished.stderr[-3000:]
    summary = _summary(out)
    assert summary["steps"] == (600 // 2) // 32, "each rank trains on its half of the data"
    # It learned: below the loss of a uniform guess (here 2.22 after one epoch). That two processes train
    # as one process of their global batch is tests/training/test_distributed.py's language-model test
    # (BatchNorm, which normalizes each rank's batch alone, rules out an exact match here).
    assert summary["metrics"]["eval_loss"] < math.log(10), summary["metrics"]


@pytest.mark.parametrize("args, message", [
    (["--recipe", "cifar_spicy"], "--recipe cifar_spicy: no such recipe; known: cifar_baseline, "),
    (["--recipe", "cifar_baseline", "--set", "optimizer.lr=fast"], "not a Python literal"),
    (["--recipe", "cifar_baseline", "--set", "optimizer.beta=0.9"], "unknown field 'beta'"),
    (["--recipe", "cifar_baseline", "--subset", "0"], "argument --subset: must be a whole number >= 1"),
    (["--recipe", "cifar_baseline", "--device", "cuda:0"] if not __import__("torch").cuda.is_available()
     else ["--recipe", "cifar_baseline", "--device", "tpu"], "--device"),
    (["--resume"], "no checkpoint.pt"),
    (["--recipe", "cifar_baseline", "--eval-every", "-1"], "argument --eval-every: must be a whole number >= 0"),
])
def test_bad_configuration_is_refused_before_training(args, message, tiny_cifar, tmp_path, capsys):
    assert main([*args, "--data", str(tiny_cifar), "--out", str(tmp_path / "run")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_layer_freezing_is_refused_under_ddp_before_training(tiny_cifar, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    args = ["--recipe", "cifar_baseline", "--set", "methods.layer_freezing={}", "--data", str(tiny_cifar)]
    assert main([*args, "--out", str(tmp_path / "run")]) == 2
    assert "methods.layer_freezing does not work with several processes" in capsys.readouterr().err


def test_a_missing_data_folder_and_an_existing_run_are_refused(reference_run, tmp_path, capsys):
    assert main(["--recipe", "cifar_baseline", "--data", str(tmp_path / "nowhere"), "--out", str(tmp_path / "r")]) == 2
    assert "no such folder" in capsys.readouterr().err
    assert main(["--recipe", "cifar_baseline", "--data", str(tmp_path), "--out", str(reference_run[0])]) == 2
    assert "already holds a run" in capsys.readouterr().err


# -- refusals before anything is written -----------------------------------------------------------------------


BAD_VALUES = [
    ("data.crop_scale=(1.0, 0.08)", "data.crop_scale"),
    ("data.backend=tpu", "data.backend"),
    ("data.train_size=0", "data.train_size"),
    ("data.eval_size=0", "data.eval_size"),
    ("methods.stochastic_depth={'drop_rate': 1.5}", "methods.stochastic_depth"),
    ("methods.ghost_batchnorm={'ghost_batch_size': 1}", "methods.ghost_batchnorm"),
    ("model.name=resnet5O", "model.name"),
    ("methods.randaugment={'depth': -1}", "depth"),
    ("methods.randaugment={'severity': 11.0}", "severity"),
    ("methods.colout={'p_row': 1.0}", "p_row"),
    ("methods.progressive_resize={'initial_scale': 0.0}", "initial_scale"),
    ("methods.progressive_resize={'delay_fraction': 0.9}", "delay_fraction"),
    ("methods.progressive_resize={'size_increment': 0}", "size_increment"),
    ("methods.swa={'start': 0.7, 'end': 0.5}", "methods.swa"),
    ("optimizer.nesterov=True", "optimizer.nesterov"),
    ("seed=-1", "seed"),
]


@pytest.mark.parametrize("assignment, field", BAD_VALUES, ids=[a.partition("=")[0] for a, _ in BAD_VALUES])
def test_a_bad_configuration_value_is_refused_before_anything_is_written(assignment, field, tiny_cifar, tmp_path,
                                                                        capsys):
    base = ["--set", "optimizer.momentum=0.0"] if "nesterov" in assignment else []
    out = tmp_path / "run"
    assert main(["--recipe", "cifar_baseline", *base, "--set", assignment, "--data", str(tiny_cifar),
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and field in err.splitlines()[0] and "Traceback" not in err
    assert not out.exists()


def test_train_and_test_folders_with_different_classes_are_refused_before_anything_is_written(tmp_path, capsys):
    data = tmp_path / "data"
    for split, classes in (("train", ("cat", "dog")), ("test", ("cat", "horse"))):
        for name in classes:
            (data / split / name).mkdir(parents=True)
    assert main(["--recipe", "cifar_baseline", "--data", str(data), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "class folders" in err and "'dog'" in err and "'horse'" in err
    assert not (tmp_path / "run").exists()


def _saved_run(folder: Path, *, subset=20, finished=False, assignments=("schedule.epochs=3",)) -> Path:
    """A run folder as fastcore_ops.training.train leaves it (the checkpoint's contents are not read before the checks)."""
    folder.mkdir(parents=True)
    config = override(get_recipe("cifar_baseline"), list(assignments))
    (folder / "config.json").write_text(json.dumps(to_dict(config)))
    (folder / "run.json").write_text(json.dumps({"subset": subset, "eval_every": 1}))
    (folder / "checkpoint.pt").write_bytes(b"fastcore_ops checkpoint")
    if finished:
        (folder / "summary.json").write_text("{}")
    return folder


@pytest.mark.parametrize("args, message", [
    (["--epochs", "1"], "schedule.epochs differs from the run in {out}: it was 3.0, this command gives 1.0; "
                        "--epochs may only grow"),
    (["--seed", "5"], "seed differs from the run in {out}: it was 0, this command gives 5"),
    (["--set", "optimizer.lr=0.3"], "optimizer.lr differs from the run in {out}: it was 0.4, this command gives 0.3"),
    (["--recipe", "cifar_mild"], "differs from the run in {out}"),
    (["--subset", "30"], "--subset differs from the run in {out}: it was 20, this command gives 30"),
    (["--subset", "10"], "--subset differs from the run in {out}: it was 20, this command gives 10"),
    (["--eval-every", "2"], "--eval-every differs from the run in {out}: it was 1, this command gives 2"),
], ids=["shorter-epochs", "seed", "set-lr", "other-recipe", "larger-subset", "smaller-subset", "eval-every"])
def test_resume_refuses_settings_that_change_the_run(args, message, tiny_cifar, tmp_path, capsys):
    out = _saved_run(tmp_path / "run")
    saved = (out / "config.json").read_bytes()
    assert main(["--resume", *args, "--data", str(tiny_cifar), "--out", str(out)]) == 2
    assert message.format(out=out) in capsys.readouterr().err
    assert (out / "config.json").read_bytes() == saved


def test_resume_extends_an_unfinished_run_with_a_longer_epochs_but_not_a_finished_one(tiny_cifar, tmp_path, capsys):
    unfinished = _saved_run(tmp_path / "unfinished", assignments=("schedule.epochs=3", "data.batch_size=8"))
    request = checked_request(parse_args(["--resume", "--epochs", "30", "--data", str(tiny_cifar),
                                          "--out", str(unfinished)]))
    assert request.config.schedule.epochs == 30.0 and request.settings.subset == 20
    finished = _saved_run(tmp_path / "finished", finished=True)
    assert main(["--resume", "--epochs", "30", "--data", str(tiny_cifar), "--out", str(finished)]) == 2
    assert "has finished; it cannot be extended" in capsys.readouterr().err


@pytest.mark.parametrize("text, message", [
    ("{not json", "is not valid JSON"),
    ('{"model": {"nme": "resnet50"}}', "unknown configuration field 'model.nme'"),
    ('{"optimizer": {"lr": "fast"}}', "optimizer.lr must be a number > 0, got str 'fast'"),
    ('[1, 2]', "a configuration must be an object"),
    ("[" * 100_000 + "]" * 100_000, "is not valid JSON: maximum recursion depth exceeded"),  # was RecursionError
    ('{"optimizer": {"lr": Infinity}}', "is not valid JSON: Infinity is not a JSON number"),
], ids=["not-json", "unknown-field", "lr-a-string", "not-an-object", "nested-100000-deep", "lr-infinity"])
def test_a_malformed_saved_configuration_is_named_on_resume(text, message, tiny_cifar, tmp_path, capsys):
    out = _saved_run(tmp_path / "run")
    (out / "config.json").write_text(text)
    assert main(["--resume", "--data", str(tiny_cifar), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"the configuration {out / 'config.json'}" in err and message in err


@pytest.mark.parametrize("text", ['{"subset": "20", "eval_every": 1}', '{"subset": 0}', "[20]", "{",
                                  "[" * 100_000 + "]" * 100_000],  # the last was a RecursionError
                         ids=["subset-a-string", "subset-0", "not-an-object", "not-json", "nested-100000-deep"])
def test_malformed_saved_run_settings_are_named_on_resume(text, tiny_cifar, tmp_path, capsys):
    out = _saved_run(tmp_path / "run")
    (out / "run.json").write_text(text)
    assert main(["--resume", "--data", str(tiny_cifar), "--out", str(out)]) == 2
    assert f"error: the run settings {out / 'run.json'} are not valid" in capsys.readouterr().err


def test_an_old_run_without_a_checkpoint_is_not_overwritten(tiny_cifar, tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "config.json").write_text("{}")
    (out / "metrics.jsonl").write_text('{"epoch": 1}\n')
    assert main(["--recipe", "cifar_baseline", "--data", str(tiny_cifar), "--out", str(out)]) == 2
    assert "already holds files a run writes (config.json, metrics.jsonl) and no checkpoint" in capsys.readouterr().err
    assert (out / "config.json").read_text() == "{}" and (out / "metrics.jsonl").read_text() == '{"epoch": 1}\n'


@pytest.mark.parametrize("damage", ["flipped", "truncated", "empty", "crafted"])
def test_a_damaged_checkpoint_exits_2_with_one_line_naming_it(damage, micro_cifar, tmp_path, capsys):
    out = _saved_run(tmp_path / "run", subset=None, assignments=["data.batch_size=4"])
    path = out / "checkpoint.pt"
    data = checkpoint.encode({"model": {"weight": torch.zeros(1000)}, "step": 1})
    damaged = {"flipped": data[:-60] + bytes(60), "truncated": data[: len(data) // 2], "empty": b"",
               "crafted": b"\x80\x04\x95" + data[40:]}[damage]
    path.write_bytes(damaged)
    assert main(["--resume", "--no-progress", "--data", str(micro_cifar), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and str(path) in err and "Traceback" not in err


def test_a_full_disk_while_checkpointing_exits_2_saying_so(micro_cifar, tmp_path, capsys, monkeypatch):
    def full_disk(data, target):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(checkpoint, "_write_synced", full_disk)
    out = tmp_path / "run"
    assert main(["--recipe", "cifar_baseline", "--epochs", "1", "--set", "data.batch_size=4", "--set",
                 "data.num_workers=0", "--no-progress", "--data", str(micro_cifar), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"error: no space left on device while writing checkpoint {out / 'checkpoint.pt'}; it was the first one " \
           f"there, so there is no earlier checkpoint to resume from" in err, "there is no previous checkpoint to keep"
    assert "Traceback" not in err and not list(out.glob("*.tmp"))


class _StopBeforeTraining(Exception):
    pass


def _stop_before_training(device):
    raise _StopBeforeTraining


def test_a_rank_that_training_refuses_says_why_itself_at_once(micro_cifar, tmp_path, monkeypatch, capsys):
    # It waited silently for rank 0 (which refuses alike only what is checked before training): where it alone
    # met the error, its peers waited in a collective until it exited, and then said only "Connection closed".
    def unreadable(request):
        raise OSError("cannot read data/train/0001.jpg")

    monkeypatch.setattr(launch, "train_request", unreadable)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "test")
    assert main(["--recipe", "cifar_baseline", "--set", "data.batch_size=4", "--no-progress",
                 "--data", str(micro_cifar), "--out", str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err == "error: rank 1: cannot read data/train/0001.jpg\n"


@pytest.mark.parametrize(("flags", "kept"), [([], [True]), (["--return-freed-memory"], [])])
def test_training_on_a_cpu_keeps_freed_memory_unless_told_not_to(flags, kept, micro_cifar, tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(launch, "keep_freed_memory", lambda: calls.append(True) or True)
    monkeypatch.setattr(session, "init_distributed", _stop_before_training)
    with pytest.raises(_StopBeforeTraining):
        main(["--recipe", "cifar_baseline", "--set", "data.batch_size=4", "--device", "cpu", "--no-progress", *flags,
              "--data", str(micro_cifar), "--out", str(tmp_path / "run")])
    assert calls == kept
