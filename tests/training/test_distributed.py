"""Two CPU processes (gloo): every recipe trains under torchrun, evaluation counts each image once,
the LR follows the global batch, and a run that cannot work is refused once, on every rank alike."""

import json
import os
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from fastcore_ops.training import checkpoint
from fastcore_ops.training.assemble import build_trainer, lr_scaling_note
from fastcore_ops.training.config import override
from fastcore_ops.training.recipes import get_recipe, list_recipes
from fastcore_ops.training.train import child_environment, main
from tests.hang_guard import run_guarded
from tests.training.conftest import link_cifar_subset

ROOT = Path(__file__).resolve().parents[2]  # the repository: python -m fastcore_ops.training.train runs from here

PROCESSES = 2
RUN_MARK = "=== run "
# One image per class, 10 in all: 5 per process, 2 steps of batch 2. Tiny images and no warmup
# (the recipes warm up for 1-8 epochs of a 1-epoch run), so that a ResNet-50 step takes a second.
TINY = ["data.batch_size=2", "data.num_workers=0", "data.train_size=32", "data.eval_size=32",
        "data.eval_resize=32", "schedule.warmup_epochs=0"]

# Language models: a 1-layer GPT at length 16 on micro_text (89 windows per process): 2 steps of 44.
TINY_TEXT = ["data.batch_size=44", "text.sequence_length=16", "text.eval_batch_tokens=64", "schedule.warmup_epochs=0",
             "model.options={'n_layer': 1, 'n_head': 2, 'n_embd': 32}"]

# The runs of the torchrun below: every recipe, SWA (in no recipe) for its BatchNorm pass, stem freezing (in no
# recipe) from the second of the 2 steps, which leaves the stem without a gradient, and a language model sharded by
# FSDP2: {run: (recipe, assignments, other command-line arguments)}.
RUNS = {**{name: (name, [], []) for name in list_recipes()},
        "cifar_baseline_swa": ("cifar_baseline", ["methods.swa={'start': 0.0}"], []),
        "cifar_record_stem_freezing": ("cifar_record", ["methods.stem_freezing={'epochs': 0.5}"], []),
        "gpt_alibi_fsdp": ("gpt_alibi", [], ["--strategy", "fsdp"])}


def _tiny(run: str) -> tuple[str, list[str]]:
    """The recipe of ``run`` and the assignments that shrink it for these tests."""
    recipe, assignments, _ = RUNS[run]
    config = get_recipe(recipe)
    if config.task == "language_model":
        return recipe, TINY_TEXT + assignments
    # The recipes' stochastic depth (0.05-0.1) may skip no block in two steps; 0.9 surely skips some.
    skipping = ["methods.stochastic_depth.drop_rate=0.9"] if config.methods.stochastic_depth is not None else []
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


def _train_tiny(run: str, images: str, text: str, out: str) -> int:
    """``python -m fastcore_ops.training.train`` on the recipe of ``run``, shrunk; its exit code."""
    recipe, assignments = _tiny(run)
    data = text if get_recipe(recipe).task == "language_model" else images
    return main(["--recipe", recipe, *_set_flags(assignments), *RUNS[run][2], "--epochs", "1", "--eval-every", "0",
                 "--no-progress", "--data", data, "--out", out])


@pytest.fixture(scope="module")
def torchrun_runs(odd_cifar, micro_text, tmp_path_factory):
    """Every run of RUNS, shrunk, trained under torchrun: (the completed torchrun, the runs' folder).

    One torchrun makes them all (see the end of this file): the same two processes call the
    command's main() for each run in turn, so they import torch once instead of once per run
    (about 5 s of each run's 8-15 s here).
    """
    out = tmp_path_factory.mktemp("runs")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={PROCESSES}",
               "-m", "tests.training.test_distributed", str(odd_cifar), str(micro_text), str(out), *RUNS]
    finished = run_guarded(command, cwd=ROOT, env=child_environment(OMP_NUM_THREADS="1"))
    return finished, out


def _why_not(finished) -> str:
    """What the torchrun's ranks said of a run that did not finish: the line of a rank whose run exited with an error
    (see the end of this file), then stderr's end (where the peer of such a rank tells of the collective it lost)."""
    exits = [line for line in finished.stderr.splitlines() if line.startswith("rank ") and " exited " in line]
    return "\n".join([*exits, finished.stderr[-3000:]])


def _printed_for(stdout: str, run: str) -> str:
    """What rank 0 printed during ``run``."""
    return stdout.partition(f"{RUN_MARK}{run}\n")[2].partition(RUN_MARK)[0]


def _check_trained(torchrun_runs, run: str) -> None:
    finished, out = torchrun_runs
    assert (out / run / "summary.json").is_file(), _why_not(finished)
    assert json.loads((out / run / "summary.json").read_text())["steps"] == 2
    # The recipe's LR is for its reference batch; two processes of 2 images train at 4 / reference of it.
    assert lr_scaling_note(_tiny_config(run), PROCESSES) in _printed_for(finished.stdout, run)


@pytest.mark.parametrize("name", list_recipes())
def test_every_recipe_trains_under_torchrun(name, torchrun_runs):
    # The *_hot recipes' stochastic depth skips whole blocks; DDP then needs find_unused_parameters.
    # SAM's second pass goes through DDP too (medium, hot); EMA averages identical weights (mild and up).
    _check_trained(torchrun_runs, name)


def test_a_language_model_trains_sharded_by_fsdp_as_it_does_replicated(torchrun_runs):
    """FSDP2 shards the GPT over two processes; its training matches DDP's up to summation order."""
    _check_trained(torchrun_runs, "gpt_alibi_fsdp")
    _, out = torchrun_runs
    sharded, replicated = (json.loads((out / run / "summary.json").read_text())["metrics"]
                           for run in ("gpt_alibi_fsdp", "gpt_alibi"))
    assert sharded.keys() == replicated.keys() == {f"{name}{suffix}" for name in ("eval_loss", "bits_per_byte",
                                                                                  "perplexity")
                                                   for suffix in ("", "@2L", "@4L")}
    for name, value in replicated.items():
        assert sharded[name] == pytest.approx(value, rel=1e-4), name
    # Its checkpoint holds whole tensors, as one process would save them.
    state = checkpoint.load(out / "gpt_alibi_fsdp" / "checkpoint.pt")
    assert state["model"]["wte.weight"].shape == (256, 32)


def test_two_processes_train_a_language_model_as_one_process_of_their_global_batch(torchrun_runs, micro_text,
                                                                                    tmp_path):
    """Each rank takes every other window of the epoch's order, so the two ranks' batches of 44 are, step
    by step, the one process's batch of 88, and the LR follows the global batch: without BatchNorm the
    runs differ only in bf16 rounding and summation order (2e-4 of the loss here; a rank that kept its
    own gradient, or an LR for the wrong batch, moves it by far more). The CIFAR recipes' BatchNorm
    normalizes each rank's batch alone, so they cannot match one process this way."""
    _, out = torchrun_runs
    recipe, assignments = _tiny("gpt_baseline")
    one = tmp_path / "one"
    assert main(["--recipe", recipe, *_set_flags([*assignments, "data.batch_size=88"]), "--epochs", "1",
                 "--eval-every", "0", "--no-progress", "--data", str(micro_text), "--out", str(one)]) == 0
    alone, together = (json.loads((folder / "summary.json").read_text()) for folder in (one, out / "gpt_baseline"))
    assert alone["steps"] == together["steps"] == 2
    for name, value in alone["metrics"].items():
        assert together["metrics"][name] == pytest.approx(value, rel=1e-3), name


def test_swa_trains_under_torchrun(torchrun_runs):
    # SWA recomputes BatchNorm statistics on each rank's own shard; evaluation takes rank 0's.
    _check_trained(torchrun_runs, "cifar_baseline_swa")


def test_stem_freezing_trains_under_torchrun(torchrun_runs):
    # DDP must look for the frozen stem's missing gradient (find_unused_parameters) or the second step fails.
    _check_trained(torchrun_runs, "cifar_record_stem_freezing")


def test_evaluation_counts_each_image_once(torchrun_runs, odd_cifar):
    """Two processes evaluating 19 images (10 + 9, unpadded) agree with one process on the same weights."""
    finished, runs = torchrun_runs
    out = runs / "cifar_baseline"
    assert (out / "summary.json").is_file(), _why_not(finished)
    summary = json.loads((out / "summary.json").read_text())
    alone = build_trainer(_tiny_config("cifar_baseline"), data=odd_cifar, out=None, device=torch.device("cpu"),
                          subset=1, progress=False)
    alone.model.load_state_dict(checkpoint.load(out / "checkpoint.pt")["model"])
    metrics = alone.evaluate()
    # A padded shard counts one image twice: top-1 over 20, and a mean loss off by a twentieth of a difference.
    assert summary["metrics"]["top1"] == pytest.approx(metrics["top1"], abs=1e-9)
    assert summary["metrics"]["eval_loss"] == pytest.approx(metrics["eval_loss"], rel=1e-4)


@pytest.mark.parametrize("assignment, message", [
    # 10 images, 5 per process: a batch of 8 leaves no full batch on any rank.
    ("data.batch_size=8", "lower it (--set data.batch_size=5), or use fewer processes or more data"),
    ("methods.layer_freezing={}", "methods.layer_freezing does not work with several processes"),
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


@pytest.mark.parametrize("run", ["cifar_baseline", "gpt_alibi_fsdp"], ids=["ddp", "fsdp"])
def test_a_run_of_two_processes_is_not_resumed_by_one(run, torchrun_runs, odd_cifar, micro_text, capsys):
    finished, runs = torchrun_runs
    out = runs / run
    assert (out / "checkpoint.pt").is_file(), _why_not(finished)
    saved = {path.name: path.read_bytes() for path in out.iterdir()}
    data = micro_text if get_recipe(RUNS[run][0]).task == "language_model" else odd_cifar
    assert main(["--resume", *RUNS[run][2], "--no-progress", "--data", str(data), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "was trained by 2 process(es), this command starts 1" in err
    assert {path.name: path.read_bytes() for path in out.iterdir()} == saved


def _join_as_a_new_process_group_does(join):
    """``session.init_distributed`` for runs that share one process group: it waits for every rank first, as a new
    group's rendezvous does. Without it a rank that lagged checked its run's folder after rank 0 had begun to
    write there, and refused the run (seen here on a busy machine)."""
    def join_together(device):
        if dist.is_initialized():  # the first run makes the group: its rendezvous waits for every rank
            dist.barrier()
        return join(device)
    return join_together


if __name__ == "__main__":
    # Run by torchrun_runs under torchrun: DATA OUT RUN..., each run into OUT/RUN. The runs
    # share one process group: main() leaves it after each run, and joining a new one at once
    # raced with the other rank still leaving the old one (a hang, seen here).
    from fastcore_ops.training import session
    from fastcore_ops.training.rank_exit import end_process

    leave_process_group = dist.destroy_process_group
    dist.destroy_process_group = lambda *args, **kwargs: None
    session.init_distributed = _join_as_a_new_process_group_does(session.init_distributed)
    images, text, out, *runs = sys.argv[1:]
    for run in runs:
        if os.environ["RANK"] == "0":
            print(f"{RUN_MARK}{run}", flush=True)
        status = _train_tiny(run, images, text, f"{out}/{run}")
        if status != 0:  # said here, as a rank other than 0 says no refusal: else only its peer's hang would show
            sys.exit(f"rank {os.environ['RANK']}: {run} exited {status}")
    leave_process_group()
    end_process(0)
