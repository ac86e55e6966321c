"""A loader augmentation is one module: this file adds a toy one and follows it wherever a real one goes.

Registered here and nowhere else, the toy runs in the pil backend's decoding workers and in the main
process's batch stage (the path DALI's batches take, and pil's on a GPU), in its place among the
registered augmentations, and it is a training method in the ablation's catalog and the method cards.

Method card
    What: the top row of every training image is painted with the grey ``level``: a test's toy.
    When it helps: never; it shows that a loader augmentation needs one module and no other edit.
    Cost: one row written per image.
    Options (``ToyStripeOptions``): ``level`` 200.
"""

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from fastcore_ops.data import build_loader
from fastcore_ops.data.backends.dali import dali_available
from fastcore_ops.data.backends.pil import PilBackend
from fastcore_ops.data.order import epoch_order
from fastcore_ops.data.transforms import registry
from fastcore_ops.data.transforms.device_stage import IMAGENET_MEAN, IMAGENET_STD, DeviceAugment

ROOT = Path(__file__).resolve().parents[3]
NAME = "toy_stripe"
ORDER = 45  # between ColOut (40) and RandAugment (50)


@dataclass(frozen=True)
class ToyStripeOptions:
    """The toy's one option: the grey level of the painted row."""

    level: int = 200

    def apply(self, images: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        painted = images.clone()
        painted[..., 0, :] = self.level
        return painted


def register_toy() -> None:
    """Register the toy as its own module would, on import."""
    registry.augmentation(NAME, order=ORDER, runs_in="batch")(ToyStripeOptions)


@pytest.fixture
def toy(monkeypatch):
    """The toy, registered for one test; the registry is as it was afterwards."""
    registry.augmentations()  # every real augmentation registered before the copy
    monkeypatch.setattr(registry, "_AUGMENTATIONS", dict(registry._AUGMENTATIONS))
    register_toy()


def _painted(images: torch.Tensor, level: int) -> bool:
    """Whether the top row of every normalized image holds the grey ``level``."""
    grey = (level / 255 - torch.tensor(IMAGENET_MEAN)) / torch.tensor(IMAGENET_STD)
    return torch.allclose(images[:, :, 0, :], grey.view(1, 3, 1).expand_as(images[:, :, 0, :]), atol=1e-5)


BACKENDS = [
    pytest.param("pil", id="pil"),
    pytest.param("dali", id="dali", marks=pytest.mark.skipif(dali_available() is not None,
                                                             reason=f"DALI: {dali_available()}")),
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_toy_paints_every_training_batch_of_either_backend(toy, coded_tree, backend):
    tree = coded_tree(classes=2, per_class=4, size=40)
    options = dict(batch_size=4, image_size=32, train=True, seed=1, backend=backend,
                   num_workers=0 if backend == "pil" else 1)
    with_toy = build_loader(tree, **options, toy_stripe=ToyStripeOptions(level=200))
    without = build_loader(tree, **options)
    assert all(_painted(images, 200) for images, _ in with_toy)
    assert not any(_painted(images, 200) for images, _ in without)


def test_the_decoding_workers_and_the_main_process_stage_apply_the_toy_alike(toy, coded_tree):
    tree = coded_tree(classes=2, per_class=4, size=40)
    in_workers = build_loader(tree, batch_size=4, image_size=32, train=True, seed=3, backend="pil", num_workers=2,
                              toy_stripe=ToyStripeOptions(level=90))
    batches = list(in_workers)
    in_workers.close()
    assert batches and all(_painted(images, 90) for images, _ in batches)
    # The loader's own stage on the decoded crops, in this process: what it does with DALI's batches.
    decoder = PilBackend(batch_size=4, train=True, image_size=32, seed=3, num_workers=0)
    samples = [in_workers._samples[i] for i in epoch_order(8, seed=3, epoch=0, shuffle=True)]
    plans = [in_workers._plan(0, step) for step in range(2)]
    for (images, _), plan, decoded in zip(batches, plans, decoder.batches(samples, 0, 0, plans), strict=True):
        generator = torch.Generator().manual_seed(plan.augment_seed)
        assert torch.equal(images, in_workers._stage(decoded.images, size=plan.size, generator=generator))


def test_the_toy_runs_in_its_registered_place(toy, monkeypatch):
    ran = []
    for transform in registry.batch_augmentations():
        original = transform.options.apply
        monkeypatch.setattr(transform.options, "apply", lambda *args, _name=transform.name, _original=original:
                            ran.append(_name) or _original(*args))
    every = {transform.name: transform.options() for transform in registry.batch_augmentations()}
    DeviceAugment(train=True, **every)(torch.zeros(2, 3, 16, 16, dtype=torch.uint8),
                                       generator=torch.Generator().manual_seed(0))
    assert ran == ["padded_crop", "colout", NAME, "randaugment"]


def test_a_toy_that_cannot_work_is_refused(toy):
    @dataclass(frozen=True)
    class NoApply:
        level: int = 0

    @dataclass(frozen=True)
    class SamePlace(ToyStripeOptions):
        pass

    with pytest.raises(TypeError, match="needs apply"):
        registry.augmentation("no_apply", order=46, runs_in="batch")(NoApply)
    with pytest.raises(ValueError, match="clashes with 'toy_stripe' at order 45"):
        registry.augmentation("same_place", order=ORDER, runs_in="batch")(SamePlace)
    with pytest.raises(ValueError, match=r"order must be an int in \[10, 99\] for runs_in='batch', got 5"):
        registry.augmentation("early", order=5, runs_in="batch")
    with pytest.raises(ValueError, match="unknown augmentation 'toy_strip'; the batch stage's augmentations are: "
                                         "padded_crop, colout, toy_stripe, randaugment"):
        DeviceAugment(train=True, toy_strip=ToyStripeOptions())
    with pytest.raises(TypeError, match="toy_stripe must be ToyStripeOptions or None, got dict"):
        DeviceAugment(train=True, toy_stripe={"level": 3})


# Run in a fresh process: the training methods, the configuration's fields, the catalog and the cards are read
# from the registries once per process, so the toy is registered first, as a module of transforms/ would be.
TRAINING_SIDE = f"""
import json
from tests.data.transforms import test_toy_augmentation as toy
toy.register_toy()
from tests.tool_module import load_tool
from fastcore_ops.training.ablate.catalog import METHODS
from fastcore_ops.training.config import TrainConfig, override
from fastcore_ops.training.methods.registry import methods_of, plan_methods
config = override(TrainConfig(), ["methods.{NAME}={{'level': 7}}"])
print(json.dumps({{"loader": [method.name for method in methods_of("loader")],
                  "toggle": METHODS["{NAME}"].toggle(TrainConfig()),
                  "build_loader_gets": repr(plan_methods(config).augmentations["{NAME}"]),
                  "card": load_tool("method_cards").render("{NAME}")}}))
"""


def test_the_toy_is_a_training_method_in_the_ablation_catalog_and_the_cards():
    result = subprocess.run([sys.executable, "-c", TRAINING_SIDE], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["loader"] == ["progressive_resize", "alternating_flip", "padded_crop", "colout", NAME, "randaugment"]
    assert found["toggle"] == ["added", [f"methods.{NAME}={{'level': 200}}"]]
    assert found["build_loader_gets"] == "ToyStripeOptions(level=7)"
    assert "**What.** the top row of every training image is painted with the grey ``level``" in found["card"]
    assert f"**Turn it on**: `--set \"methods.{NAME}={{'level': 200}}\"`" in found["card"]
