"""benchmarks.peers: our trainer against Composer's on the same job, and the forward-plus-backward floor."""

import json
import statistics
import sys

import pytest
import torch

from benchmarks import composer_run, peers
from benchmarks.composer_run import torchvision_loader
from fastcore_ops.training.config import override
from fastcore_ops.training.recipes import get_recipe
from tests.training.conftest import link_cifar_subset

# Two steps of batch 10 on 20 images: Mild's progressive resizing trains them at two sizes.
SHORT = ["--set", "data.batch_size=10", "--set", "schedule.epochs=1"]


@pytest.fixture(scope="module")
def micro_cifar(tmp_path_factory):
    return link_cifar_subset(tmp_path_factory.mktemp("peers-cifar"), train_per_class=2, test_per_class=2)


def _read(out):
    return json.loads((out / "peers.json").read_text())


def test_without_composer_it_says_so_in_one_line_and_times_ours_against_the_floor(micro_cifar, tmp_path, capsys):
    out = tmp_path / "out"
    arguments = ["--data", str(micro_cifar), "--pairs", "1", "--peers", str(tmp_path / "empty"), "--out", str(out),
                 *SHORT]
    assert peers.main(arguments) == 0
    printed = capsys.readouterr().out
    assert sum("Composer cannot be imported" in line for line in printed.splitlines()) == 1
    report = _read(out)
    (run,) = report["runs"]
    floor = report["floor"]
    assert run["trainer"] == "ours" and report["composer"] is None
    # The floor covers the same steps as the run, at the sizes progressive resizing gives them.
    assert floor["steps"] == run["steps"] == 2
    assert sum(size["steps"] for size in floor["sizes"].values()) == 2
    assert set(floor["sizes"]) == {"16", "20"}  # Mild's sizes at 0 and 1/2 of the run
    assert all(0 < size["step_seconds"] <= size["median_step_seconds"] for size in floor["sizes"].values())
    assert floor["train_seconds"] <= floor["median_train_seconds"]
    assert floor["precision"].startswith("precision: "), "the floor records the precision it timed in, and why"
    assert 0 < floor["train_seconds"] < run["train_seconds"]
    assert "Our time over the floor" in (out / "peers.md").read_text()
    assert (out / "peers.png").stat().st_size > 0 and (out / "peers.csv").read_text().count("\n") == 3  # header, run, floor
    # Started again, it reads the finished runs instead of training them again.
    assert peers.main(arguments) == 0
    assert "running" not in capsys.readouterr().out and _read(out) == report


@pytest.mark.skipif(peers.peer_version(peers.REPOSITORY / ".peers", "composer") is None,
                    reason="Composer is not installed in .peers/ (make peers; make test installs it)")
def test_composer_trains_the_same_steps_with_its_own_algorithms(micro_cifar, tmp_path):
    out = tmp_path / "out"
    assert peers.main(["--data", str(micro_cifar), "--pairs", "1", "--out", str(out), *SHORT]) == 0
    report = _read(out)
    assert report["composer"] == "0.32.1"
    assert [run["trainer"] for run in report["runs"]] == ["ours", "composer"]
    assert all(run["steps"] == 2 and 0 <= run["top1"] <= 1 for run in report["runs"])
    assert "Composer's time over ours: median" in (out / "peers.md").read_text()


def test_a_failed_run_ends_the_benchmark_with_one_line_naming_its_log(micro_cifar, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(peers, "job_command", lambda *_: [sys.executable, "-c", "raise SystemExit(3)"])
    out = tmp_path / "out"
    assert peers.main(["--data", str(micro_cifar), "--peers", str(tmp_path / "empty"), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err == f"error: ours-0 failed (exit 3); see {out / 'runs' / 'ours-0.log'}\n"


def test_composer_s_torchvision_loader_crops_and_flips_as_the_recipe_does(micro_cifar):
    recipe = override(get_recipe("cifar_baseline"), ['methods.padded_crop={"fill": "reflect"}'])
    loader = torchvision_loader(recipe, micro_cifar / "train", subset=1)
    resize, crop, flip = loader.dataset.transform.transforms[:3]
    assert (resize.size, crop.padding, crop.padding_mode) == ((32, 32), 4, "reflect") and flip.p == 0.5
    assert len(loader.dataset) == 10 and loader.batch_size == recipe.data.batch_size and loader.drop_last
    images, labels = next(iter(torchvision_loader(override(recipe, ["data.batch_size=5"]), micro_cifar / "train", 1)))
    assert images.shape == (5, 3, 32, 32) and labels.dtype == torch.int64


def test_a_composer_job_names_the_methods_it_cannot_hand_over():
    composer_run.check(get_recipe("cifar_mild"))
    with pytest.raises(ValueError, match="has methods.stochastic_depth, methods.colout, methods.randaugment, "
                                         "methods.mixup, methods.sam, methods.ema: the Composer job sets up"):
        composer_run.check(get_recipe("resnet50_hot"))
    with pytest.raises(ValueError, match="task 'language_model'"):
        composer_run.check(get_recipe("gpt_baseline"))


@pytest.mark.skipif(peers.peer_version(peers.REPOSITORY / ".peers", "airbench") is None,
                    reason="airbench is not installed in .peers/ (make peers; make test installs it)")
def test_airbench_pairs_against_ours_on_held_out_seeds_with_each_side_s_top1(micro_cifar, tmp_path):
    out = tmp_path / "out"
    assert peers.main(["--peer", "airbench", "--data", str(micro_cifar), "--pairs", "2", "--out", str(out), *SHORT,
                       "--airbench-epochs", "1", "--airbench-batch-size", "10"]) == 0
    report = _read(out)
    assert report["airbench"] == "0.1.8" and "composer" not in report
    runs = [(run["pair"], run["trainer"], run["seed"]) for run in report["runs"]]
    assert runs == [(0, "ours", 3), (0, "airbench", 3), (1, "airbench", 4), (1, "ours", 4)]
    assert json.loads((out / "runs" / "ours-1" / "config.json").read_text())["seed"] == 4
    airbench = [run for run in report["runs"] if run["trainer"] == "airbench"]
    assert all(run["steps"] == 2 and 0 <= run["top1_tta"] <= 1 and run["tta_seconds"] > 0 for run in airbench)
    table = (out / "peers.md").read_text()
    assert "airbench's time over ours: median" in table and "airbench's time with its TTA evaluation" in table
    assert "airbench's top-1 with TTA: mean" in table and "Our top-1 without TTA: mean" in table
    assert "airbench's clock starts with its images decoded in memory: reading its training and test images" in table
    ours = {run["pair"]: run["train_seconds"] for run in report["runs"] if run["trainer"] == "ours"}
    assert all(0 < run["train_read_seconds"] < run["read_seconds"] for run in airbench)
    charged = [(run["train_seconds"] + run["train_read_seconds"]) / ours[run["pair"]] for run in airbench]
    assert (f"airbench's time with the reading of its training images charged to it, over ours: median "
            f"{statistics.median(charged):.3f}x") in table


def test_airbench_runs_on_the_cpu_only(micro_cifar, tmp_path, monkeypatch, capsys):
    from fastcore_ops import checks

    monkeypatch.setattr(checks, "check_device", lambda flag, name: torch.device(name))  # as if this machine had CUDA
    assert peers.main(["--peer", "airbench", "--device", "cuda", "--data", str(micro_cifar),
                       "--out", str(tmp_path / "out")]) == 2
    assert "the airbench job runs on the CPU" in capsys.readouterr().err and not (tmp_path / "out").exists()


def test_the_floor_times_the_steps_after_stem_freezing_with_the_stem_frozen(micro_cifar, tmp_path):
    from benchmarks import step_floor
    out = tmp_path / "floor"
    # 20 images at batch 4 for 2 epochs: 10 steps; the stem freezes after half an epoch, from the 4th step on.
    arguments = ["--recipe", "cifar_record_muon", "--data", str(micro_cifar), "--out", str(out)]
    for assignment in ("data.batch_size=4", "schedule.epochs=2", "precision=fp32", "methods.patch_whitening.images=8",
                       "methods.stem_freezing={'epochs': 0.5}"):
        arguments += ["--set", assignment]
    assert step_floor.main(arguments) == 0
    sizes = json.loads((out / "summary.json").read_text())["sizes"]
    assert {label: size["steps"] for label, size in sizes.items()} == {"32": 3, "32, stem frozen": 7}
