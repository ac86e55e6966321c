"""Two CPU processes (gloo): every recipe trains under torchrun, evaluation counts each image once,
the LR follows the global batch, and a run that cannot work is refused once, on every rank alike."""

import json
import os
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist

from tests.training.conftest import link_cifar_subset
from training import checkpoint
from training.assemble import build_trainer, lr_scaling_note
from training.config import override
from training.recipes import get_recipe, list_recipes
from training.train import PROJECT_ROOT, child_environment, main

PROCESSES = 2
RUN_MARK = "=== run "
# One image per class, 10 in all: 5 per process, 2 steps of batch 2. Tiny images and no warmup
# (the recipes warm up for 1-8 epochs of a 1-epoch run), so that a ResNet-50 step takes a second.
TINY = ["data.batch_size=2", "data.num_workers=0", "data.train_size=32", "data.eval_size=32",
        "data.eval_resize=32", "schedule.warmup_epochs=0"]

# The runs of the torchrun below: every recipe, and SWA (in no recipe) for its BatchNorm pass.
RUNS = {**{name: (name, []) for name in list_recipes()},
        "cifar_baseline_swa": ("cifar_baseline", ["methods.swa=True", "methods.swa_start=0.0"])}


def _tiny(run: str) -> tuple[str, list[str]]:
    """The recipe of ``run`` and the assignments that shrink it for these tests."""
    recipe, assignments = RUNS[run]
    # The recipes' stochastic depth (0.05-0.1) may skip no block in two steps; 0.9 surely skips some.
    skipping = ["model.stochastic_depth=0.9"] if get_recipe(recipe).model.stochastic_depth else []
    return recipe, TINY + skipping + assignments


def _tiny_config(run: str):
    recipe, assignments = _tiny(run)
    return override(get_recipe(recipe), assignments)


@pytest.fixture(scope="module")
def odd_cifar(tmp_path_factory):
    """CIFAR-10 with 1 training image per class and 19 test images: not a multiple of 2."""
    root = link_cifar_subset(tmp_path_factory.mktemp("odd_cifar"), train_per_class=1, test_per_class=2)
    next((root / "test").glob("*/*")).unlink()
    return root


def _set_flags(assignments: list[str]) -> list[str]:
    return [argument for assignment in assignments for argument in ("--set", assignment)]


def _train_tiny(run: str, data: str, out: str) -> int:
    """``python -m training.train`` on the recipe of ``run``, shrunk; its exit code."""
    recipe, assignments = _tiny(run)
    return main(["--recipe", recipe, *_set_flags(assignments), "--epochs", "1", "--eval-every", "0", "--no-progress",
                 "--data", data, "--out", out])


@pytest.fixture(scope="module")
def torchrun_runs(odd_cifar, tmp_path_factory):
    """Every run of RUNS, shrunk, trained under torchrun: (the completed torchrun, the runs' folder).

    One torchrun makes them all (see the end of this file): the same two processes call the
    command's main() for each run in turn, so they import torch once instead of once per run
    (about 5 s of each run's 8-15 s here).
    """
    out = tmp_path_factory.mktemp("runs")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={PROCESSES}",
               "-m", "tests.training.test_distributed", str(odd_cifar), str(out), *RUNS]
    finished = subprocess.run(command, cwd=PROJECT_ROOT, env=child_environment(OMP_NUM_THREADS="1"),
                              capture_output=True, text=True, timeout=400)
    return finished, out


def _printed_for(stdout: str, run: str) -> str:
    """What rank 0 printed during ``run``."""
    return stdout.partition(f"{RUN_MARK}{run}\n")[2].partition(RUN_MARK)[0]


def _check_trained(torchrun_runs, run: str) -> None:
    finished, out = torchrun_runs
    assert (out / run / "summary.json").is_file(), finished.stderr[-3000:]
    assert json.loads((out / run / "summary.json").read_text())["steps"] == 2
    # The recipe's LR is for its reference batch; two processes of 2 images train at 4 / reference of it.
    assert lr_scaling_note(_tiny_config(run), PROCESSES) in _printed_for(finished.stdout, run)


@pytest.mark.parametrize("name", list_recipes())
def test_every_recipe_trains_under_torchrun(name, torchrun_runs):
    # The *_hot recipes' stochastic depth skips whole blocks; DDP then needs find_unused_parameters.
    # SAM's second pass goes through DDP too (medium, hot); EMA averages identical weights (mild and up).
    _check_trained(torchrun_runs, name)


def test_swa_trains_under_torchrun(torchrun_runs):
    # SWA recomputes BatchNorm statistics on each rank's own shard; evaluation takes rank 0's.
    _check_trained(torchrun_runs, "cifar_baseline_swa")


def test_evaluation_counts_each_image_once(torchrun_runs, odd_cifar):
    """Two processes evaluating 19 images (10 + 9, unpadded) agree with one process on the same weights."""
    finished, runs = torchrun_runs
    out = runs / "cifar_baseline"
    assert (out / "summary.json").is_file(), finished.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    alone = build_trainer(_tiny_config("cifar_baseline"), data=odd_cifar, out=None, device=torch.device("cpu"),
                          subset=1, progress=False)
    alone.model.load_state_dict(checkpoint.load(out / "checkpoint.pt")["model"])
    top1, eval_loss = alone.evaluate()
    # A padded shard counts one image twice: top-1 over 20, and a mean loss off by a twentieth of a difference.
    assert summary["top1"] == pytest.approx(top1, abs=1e-9)
    assert summary["eval_loss"] == pytest.approx(eval_loss, rel=1e-4)


@pytest.mark.parametrize("assignment, message", [
    # 10 images, 5 per process: a batch of 8 leaves no full batch on any rank.
    ("data.batch_size=8", "lower it (--set data.batch_size=5), or use fewer processes or more data"),
    ("methods.freeze_level=0.5", "layer freezing) does not work with several processes"),
], ids=["shard-smaller-than-a-batch", "layer-freezing"])
def test_a_refused_run_says_so_once_and_every_rank_exits_2(assignment, message, odd_cifar, tmp_path,
                                                           monkeypatch, capsys):
    # Each rank as torchrun starts it; refused before joining the process group, so in this process.
    monkeypatch.setenv("WORLD_SIZE", str(PROCESSES))
    errors = []
    for rank in range(PROCESSES):
        monkeypatch.setenv("RANK", str(rank))
        assert main(["--recipe", "cifar_baseline", "--set", assignment, "--subset", "1", "--no-progress",
                     "--data", str(odd_cifar), "--out", str(tmp_path / "run")]) == 2
        errors.append(capsys.readouterr().err)
    assert message in errors[0] and errors[0].startswith("error: ") and errors[1:] == [""] * (PROCESSES - 1)
    assert not (tmp_path / "run").exists()


if __name__ == "__main__":
    # Run by torchrun_runs under torchrun: DATA OUT RUN..., each run into OUT/RUN. The runs
    # share one process group: main() leaves it after each run, and joining a new one at once
    # raced with the other rank still leaving the old one (a hang, seen here).
    leave_process_group = dist.destroy_process_group
    dist.destroy_process_group = lambda *args, **kwargs: None
    data, out, *runs = sys.argv[1:]
    for run in runs:
        if os.environ["RANK"] == "0":
            print(f"{RUN_MARK}{run}", flush=True)
        _train_tiny(run, data, f"{out}/{run}")
    leave_process_group()
