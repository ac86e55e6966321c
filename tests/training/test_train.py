"""``python -m training.train`` end to end on real CIFAR-10 images: learning, outputs, errors, kill and resume, DDP."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from training.train import PROJECT_ROOT, child_environment, main

# Small and quick: 600 training images, batch 32 (so LR 0.2, the recipe's 0.8 scaled from its
# batch 128), three epochs; the references (not the interpreter) run the kernels so that the
# subprocesses train at full CPU speed.
QUICK = ["--recipe", "cifar_baseline", "--epochs", "3", "--set", "data.batch_size=32", "--set", "optimizer.lr=0.2",
         "--set", "data.num_workers=1", "--set", "schedule.warmup_epochs=0.5", "--no-progress"]


def _run(*args, **popen):
    environment = child_environment()
    return subprocess.Popen([sys.executable, "-m", "training.train", *args], cwd=PROJECT_ROOT, env=environment,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def _finish(process, timeout=240):
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
    assert summary["top1"] > 0.2, "three epochs on 600 images should beat chance (10%) clearly"
    assert summary["steps"] == 3 * (600 // 32)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [row["epoch"] for row in rows] == [1, 2, 3]
    assert rows[-1]["train_seconds"] == pytest.approx(summary["train_seconds"])
    assert (out / "curves.png").stat().st_size > 10_000
    assert json.loads((out / "config.json").read_text())["schedule"]["epochs"] == 3.0
    assert "top-1" in stdout and "images/s" in stdout and "train time" in stdout


def _wait_for_rows(out: Path, rows: int, process, timeout=180):
    deadline = time.monotonic() + timeout
    metrics = out / "metrics.jsonl"
    while time.monotonic() < deadline:
        if metrics.is_file() and len(metrics.read_text().splitlines()) >= rows and (out / "checkpoint.pt").is_file():
            return
        assert process.poll() is None, process.communicate()[1]
        time.sleep(0.05)
    raise AssertionError(f"no {rows} epoch(s) of metrics in {out} after {timeout} s")


def test_a_run_killed_mid_training_resumes_to_the_same_steps_and_metrics(reference_run, tiny_cifar, tmp_path):
    out = tmp_path / "killed"
    process = _run(*QUICK, "--data", str(tiny_cifar), "--out", str(out))
    _wait_for_rows(out, 1, process)
    time.sleep(0.5)  # into the second epoch
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not _summary_exists(out)
    code, _, stderr = _finish(_run("--resume", "--no-progress", "--data", str(tiny_cifar), "--out", str(out)))
    assert code == 0, stderr
    resumed, reference = _summary(out), _summary(reference_run[0])
    assert resumed["steps"] == reference["steps"]
    assert resumed["top1"] == pytest.approx(reference["top1"], abs=0.005)
    assert [json.loads(r)["epoch"] for r in (out / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3]


def _summary_exists(out: Path) -> bool:
    return (out / "summary.json").is_file()


def test_sigterm_checkpoints_mid_epoch_and_the_resumed_run_matches(reference_run, tiny_cifar, tmp_path):
    out = tmp_path / "terminated"
    process = _run(*QUICK, "--data", str(tiny_cifar), "--out", str(out))
    _wait_for_rows(out, 1, process)
    time.sleep(0.3)
    process.send_signal(signal.SIGTERM)
    code, _, stderr = _finish(process)
    assert code == 128 + signal.SIGTERM and "--resume" in stderr
    code, _, stderr = _finish(_run("--resume", "--no-progress", "--data", str(tiny_cifar), "--out", str(out)))
    assert code == 0, stderr
    resumed, reference = _summary(out), _summary(reference_run[0])
    assert resumed["steps"] == reference["steps"]
    assert resumed["top1"] == pytest.approx(reference["top1"], abs=0.005)


def test_two_processes_train_with_ddp_on_the_cpu(tiny_cifar, tmp_path):
    out = tmp_path / "ddp"
    environment = child_environment(OMP_NUM_THREADS="1")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
               "-m", "training.train", *QUICK, "--epochs", "1", "--data", str(tiny_cifar), "--out", str(out)]
    finished = subprocess.run(command, cwd=PROJECT_ROOT, env=environment, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr[-3000:]
    summary = _summary(out)
    assert summary["steps"] == (600 // 2) // 32, "each rank trains on its half of the data"
    assert 0 <= summary["top1"] <= 1


@pytest.mark.parametrize("args, message", [
    (["--recipe", "cifar_spicy"], "must be one of the recipes"),
    (["--recipe", "cifar_baseline", "--set", "optimizer.lr=fast"], "not a Python literal"),
    (["--recipe", "cifar_baseline", "--set", "optimizer.beta=0.9"], "unknown field 'beta'"),
    (["--recipe", "cifar_baseline", "--subset", "0"], "--subset must be >= 1"),
    (["--recipe", "cifar_baseline", "--device", "cuda:0"] if not __import__("torch").cuda.is_available()
     else ["--recipe", "cifar_baseline", "--device", "tpu"], "--device"),
    (["--resume"], "no checkpoint.pt"),
    (["--recipe", "cifar_baseline", "--eval-every", "-1"], "--eval-every must be >= 0"),
])
def test_bad_configuration_is_refused_before_training(args, message, tiny_cifar, tmp_path, capsys):
    assert main([*args, "--data", str(tiny_cifar), "--out", str(tmp_path / "run")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_layer_freezing_is_refused_under_ddp_before_training(tiny_cifar, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    args = ["--recipe", "cifar_baseline", "--set", "methods.freeze_level=0.5", "--data", str(tiny_cifar)]
    assert main([*args, "--out", str(tmp_path / "run")]) == 2
    assert "layer freezing" in capsys.readouterr().err


def test_a_missing_data_folder_and_an_existing_run_are_refused(reference_run, tmp_path, capsys):
    assert main(["--recipe", "cifar_baseline", "--data", str(tmp_path / "nowhere"), "--out", str(tmp_path / "r")]) == 2
    assert "no such folder" in capsys.readouterr().err
    assert main(["--recipe", "cifar_baseline", "--data", str(tmp_path), "--out", str(reference_run[0])]) == 2
    assert "already holds a run" in capsys.readouterr().err
