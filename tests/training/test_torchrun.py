"""``python -m training.torchrun``: torchrun ending with the training command's own exit status.

Its stop (exit 143 after a SIGTERM to the job) is in test_stop_signals.py.
"""

import subprocess
import sys
from pathlib import Path

from training.torchrun import main as torchrun_main
from training.train import child_environment, main

ROOT = Path(__file__).resolve().parents[2]  # the repository: python -m training.torchrun runs from here


def test_two_processes_resuming_a_run_of_one_refuse_before_joining_and_the_command_exits_2_with_one_line(
        micro_cifar, tmp_path):
    # Plain torchrun ended it with its own ChildFailedError traceback and status 1, and could stop rank 0
    # before it printed the refusal (a rank that refused at once was reason enough for it to stop the others).
    out = tmp_path / "one"
    assert main(["--recipe", "cifar_baseline", "--epochs", "1", "--set", "data.batch_size=4",
                 "--set", "data.num_workers=0", "--eval-every", "0", "--no-progress", "--data", str(micro_cifar),
                 "--out", str(out)]) == 0
    saved = {path.name: path.read_bytes() for path in out.iterdir()}
    finished = subprocess.run([sys.executable, "-m", "training.torchrun", "--standalone", "--nproc_per_node=2",
                               "-m", "training.train", "--resume", "--no-progress", "--data", str(micro_cifar),
                               "--out", str(out)],
                              cwd=ROOT, env=child_environment(OMP_NUM_THREADS="1"), capture_output=True, text=True,
                              timeout=120)
    assert finished.returncode == 2, finished.stderr[-3000:]
    errors = [line for line in finished.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "was trained by 1 process(es), this command starts 2" in errors[0], finished.stderr
    assert "Traceback" not in finished.stderr
    assert {path.name: path.read_bytes() for path in out.iterdir()} == saved


def test_a_command_line_torchrun_cannot_parse_is_one_error_line_and_exit_2(capsys):
    assert torchrun_main(["--nproc_per_node=2"]) == 2  # no training command
    err = capsys.readouterr().err
    assert err.startswith("error: the following arguments are required: training_script") and err.count("\n") == 1
