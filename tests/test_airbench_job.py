"""benchmarks.airbench_job: airbench94's own training on a CPU, on the images of a JPEG folder."""

import json
import sys

import numpy as np
import pytest
import torch
from PIL import Image
from torch import nn

from benchmarks import airbench_job, peers
from benchmarks.airbench_run import DEVIATIONS, read_split
from fastcore_ops.training.precision import Precision
from tests.training.conftest import link_cifar_subset

INSTALLED = peers.REPOSITORY / ".peers"
needs_airbench = pytest.mark.skipif(peers.peer_version(INSTALLED, "airbench") is None,
                                    reason="airbench is not installed in .peers/ (make peers; make test installs it)")
FP32 = Precision(None, "the test's")
# Two steps of batch 10 on micro_cifar's 20 training images: airbench's 9.9 epochs and batch 1024 would take none.
SHORT = ["--epochs", "1", "--batch-size", "10", "--precision", "fp32"]


@pytest.fixture(scope="module")
def micro_cifar(tmp_path_factory):
    return link_cifar_subset(tmp_path_factory.mktemp("airbench-cifar"), train_per_class=2, test_per_class=2)


@pytest.fixture(scope="module")
def airbench():
    sys.path.append(str(INSTALLED))  # after this environment's packages, as the job appends it
    import airbench

    return airbench


def test_a_folder_reads_into_airbench_s_tensors_with_its_classes_interleaved(micro_cifar):
    split = read_split(micro_cifar / "train")
    classes = sorted(folder.name for folder in (micro_cifar / "train").iterdir())
    assert split["classes"] == classes
    assert split["images"].shape == (20, 32, 32, 3) and split["images"].dtype == torch.uint8
    assert split["labels"].tolist() == list(range(10)) * 2  # each class's first image, then each class's second
    for index, name in ((0, "airplane"), (1, "automobile"), (10, "airplane"), (19, "truck")):
        path = sorted((micro_cifar / "train" / name).iterdir())[index // 10]
        assert torch.equal(split["images"][index], torch.from_numpy(np.array(Image.open(path).convert("RGB"))))
    assert read_split(micro_cifar / "train", subset=1)["labels"].tolist() == list(range(10))


@needs_airbench
def test_airbench_s_loader_takes_the_images_in_fp32_and_its_network_builds_on_the_cpu(micro_cifar, airbench, tmp_path):
    from airbench.lib_airbench94 import make_net94

    from benchmarks.airbench_run import cifar_loader, cpu_net94

    split = read_split(micro_cifar / "train")
    loader = cifar_loader(split, tmp_path, train=True, batch_size=10)
    assert loader.images.dtype == torch.float32 and loader.images.shape == (20, 3, 32, 32)
    assert torch.equal(loader.labels, split["labels"]) and len(loader) == 2 and loader.altflip
    assert torch.allclose(loader.images[3], split["images"][3].permute(2, 0, 1) / 255, atol=1e-3)
    images, labels = next(iter(loader))
    assert images.shape == (10, 3, 32, 32) and labels.shape == (10,)
    net = cpu_net94(FP32)
    with pytest.MonkeyPatch.context() as patch:  # airbench's network as it builds it, only .cuda() left out
        patch.setattr(nn.Module, "cuda", lambda module, device=None: module)
        original = make_net94()
    assert [(name, tuple(p.shape), p.requires_grad) for name, p in net.named_parameters()] == \
           [(name, tuple(p.shape), p.requires_grad) for name, p in original.named_parameters()]
    assert all(p.dtype == torch.float32 for p in net.parameters())
    assert not net[0].weight.requires_grad, "the whitening layer stays frozen"
    assert net(images).shape == (10, 10) and net(images).dtype == torch.float32


def test_the_job_s_docstring_names_every_deviation_summary_json_lists():
    assert all(f"- {label}: " in airbench_job.__doc__ for label in DEVIATIONS)


@needs_airbench
def test_a_short_run_writes_its_summary(micro_cifar, airbench, tmp_path, capsys):
    out = tmp_path / "out"
    assert airbench_job.main(["--data", str(micro_cifar), "--peers", str(INSTALLED), "--out", str(out), "--seed", "4",
                              *SHORT]) == 0
    assert "tta_val_acc" in capsys.readouterr().out, "airbench prints its own table"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 2 and (summary["epochs"], summary["batch_size"], summary["seed"]) == (1, 10, 4)
    assert 0 <= summary["metrics"]["top1"] <= 1 and 0 <= summary["metrics"]["top1_tta"] <= 1
    assert 0 < summary["train_seconds"] and 0 < summary["tta_seconds"] and 0 < summary["read_seconds"]
    assert 0 < summary["train_read_seconds"] < summary["read_seconds"]
    assert summary["airbench_seconds"] == pytest.approx(summary["train_seconds"] + summary["tta_seconds"])
    assert (summary["train_images"], summary["test_images"]) == (20, 20)
    assert summary["deviations"] == DEVIATIONS and summary["precision"].startswith("precision: fp32")


def _small_image_folder(root):
    for split in ("train", "test"):
        (root / split / "cat").mkdir(parents=True)
        Image.new("RGB", (40, 30)).save(root / split / "cat" / "0000.jpg")
    return root


@needs_airbench
@pytest.mark.parametrize("case, expected", [
    ("no data", "no such folder"),
    ("out not empty", "is not empty; give a new folder"),
    ("batch over the images", "--batch-size 50: more than the 20 training images"),
    ("not CIFAR-sized", "40x30 pixels; airbench94's network takes 32x32 CIFAR-10 images"),
    ("no epochs", "--epochs: must be a number > 0, got '0'"),
])
def test_bad_input_is_refused_with_one_error_line_and_no_output(case, expected, micro_cifar, tmp_path, capsys):
    out = tmp_path / "out"
    arguments = {"--data": str(micro_cifar), "--peers": str(INSTALLED), "--out": str(out), "--batch-size": "10"}
    if case == "no data":
        arguments["--data"] = str(tmp_path / "absent")
    elif case == "out not empty":
        (out / "mine").mkdir(parents=True)
    elif case == "batch over the images":
        arguments["--batch-size"] = "50"
    elif case == "not CIFAR-sized":
        arguments["--data"] = str(_small_image_folder(tmp_path / "small"))
        arguments["--batch-size"] = "1"
    else:
        arguments["--epochs"] = "0"
    assert airbench_job.main([part for pair in arguments.items() for part in pair]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and expected in err
    if case == "out not empty":
        assert [p.name for p in out.iterdir()] == ["mine"], "--out is left as it was"
    else:
        assert not out.exists()
