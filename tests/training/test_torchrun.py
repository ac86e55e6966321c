"""``python -m fastcore_ops.training.torchrun``: torchrun ending with the training command's own exit status.

Its stop (exit 143 after a SIGTERM to the job) is in test_stop_signals.py.
"""

import sys
from pathlib import Path

import pytest
from torch.distributed import run as torch_run

from fastcore_ops.training.torchrun import main as torchrun_main
from fastcore_ops.training.train import child_environment, main
from tests.hang_guard import run_guarded

ROOT = Path(__file__).resolve().parents[2]  # the repository: python -m fastcore_ops.training.torchrun runs from here


def test_two_processes_resuming_a_run_of_one_refuse_before_joining_and_the_command_exits_2_with_one_line(
        micro_cifar, tmp_path):
    # Plain torchrun ended it with its own ChildFailedError traceback and status 1, and could stop rank 0
    # before it printed the refusal (a rank that refused at once was reason enough for it to stop the others).
    out = tmp_path / "one"
    assert main(["--recipe", "cifar_baseline", "--epochs", "1", "--set", "data.batch_size=4",
                 "--set", "data.num_workers=0", "--eval-every", "0", "--no-progress", "--data", str(micro_cifar),
                 "--out", str(out)]) == 0
    saved = {path.name: path.read_bytes() for path in out.iterdir()}
    finished = run_guarded([sys.executable, "-m", "fastcore_ops.training.torchrun", "--standalone", "--nproc_per_node=2",
                               "-m", "fastcore_ops.training.train", "--resume", "--no-progress", "--data", str(micro_cifar),
                               "--out", str(out)],
                              cwd=ROOT, env=child_environment(OMP_NUM_THREADS="1"))
    assert finished.returncode == 2, finished.stderr[-3000:]
    errors = [line for line in finished.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "was trained by 1 process(es), this command starts 2" in errors[0], finished.stderr
    assert "Traceback" not in finished.stderr
    assert {path.name: path.read_bytes() for path in out.iterdir()} == saved


def test_a_command_line_torchrun_cannot_parse_is_one_error_line_and_exit_2(capsys):
    assert torchrun_main(["--nproc_per_node=2"]) == 2  # no training command
    err = capsys.readouterr().err
    assert err.startswith("error: the following arguments are required: training_script") and err.count("\n") == 1


@pytest.mark.parametrize("args, message", [
    (["--nproc_per_node=abc"], "--nproc_per_node 'abc': not a number of processes; give a whole number >= 1"),
    (["--nproc_per_node=0"], "--nproc_per_node '0': starts 0 processes; give a whole number >= 1"),
    (["--nnodes=0"], "--nnodes '0': must be a number of nodes >= 1, or MIN:MAX"),
    (["--nnodes=2:1"], "--nnodes '2:1': must be a number of nodes >= 1, or MIN:MAX"),
    (["--max-restarts=-1"], "--max-restarts -1: must be a whole number >= 0"),
], ids=["nproc-word", "nproc-0", "nnodes-0", "nnodes-min-above-max", "max-restarts"])
def test_a_process_or_node_count_torchrun_cannot_use_is_refused_before_any_process_starts(
        args, message, monkeypatch, capsys):
    # Plain torchrun ended each with its own ValueError or AssertionError traceback and status 1.
    monkeypatch.setattr(torch_run, "run", _no_run)
    assert torchrun_main([*args, "-m", "fastcore_ops.training.train"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {message}") and err.count("\n") == 1, err


@pytest.mark.parametrize("args, message", [
    (["-m", "fastcore_ops.training.no_such_module"], "-m fastcore_ops.training.no_such_module: no such module; name a module on the Python path"),
    (["-m", "no_such_package.train"], "-m no_such_package.train: cannot be found (ModuleNotFoundError: No module "
                                      "named 'no_such_package')"),
    (["-m", "fastcore_ops.training"], "-m fastcore_ops.training: a package without a __main__ module"),
    (["no_such_script.py"], "no_such_script.py: no such script"),
], ids=["module", "package", "package-without-main", "script"])
def test_a_training_command_that_does_not_exist_is_refused_before_any_process_starts(
        args, message, monkeypatch, capsys):
    # Plain torchrun started the processes, each failed with python's "No module named", and it ended with
    # its ChildFailedError traceback and status 1.
    monkeypatch.setattr(torch_run, "run", _no_run)
    assert torchrun_main(["--standalone", "--nproc_per_node=1", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {message}") and err.count("\n") == 1, err


def _no_run(args):
    raise AssertionError("torchrun started processes for a command line it should have refused")


@pytest.mark.parametrize("world_size, printed", [("2", "trained\n"), ("1", "trained\nshut down\n")])
def test_a_process_of_a_multi_process_run_ends_with_its_status_and_output_but_without_the_shutdown(world_size,
                                                                                                 printed):
    # In the shutdown a gloo thread freeing a collective's tensors was ended mid-call: exit -6 after a run that
    # succeeded (reports/torchrun-exit-abort-20261205/). One process alone shuts down as usual.
    code = ("import atexit; from fastcore_ops.training.rank_exit import end_process; "
            "atexit.register(print, 'shut down'); print('trained'); end_process(3)")
    ended = run_guarded([sys.executable, "-c", code], cwd=ROOT, env={**child_environment(), "WORLD_SIZE": world_size})
    assert (ended.returncode, ended.stdout) == (3, printed), ended.stderr
