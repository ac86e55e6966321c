"""The registered order is the order that runs: the real pipeline, instrumented, on both backends.

Each stage's own code is wrapped where the pipeline calls it: the progressive-resizing schedule the
decoders crop by, the decoders' alternating flips, the batch stage's resize, random flip,
augmentations and normalization, and the trainer's step augmentations. One training batch goes
through ``build_loader`` and then the trainer's step methods, and the order in which the stages
first touched it must be their order in the one registry of augmentations.
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fastcore_ops.data import build_loader
from fastcore_ops.data.backends import dali, pil
from fastcore_ops.data.backends.dali import dali_available
from fastcore_ops.data.loader_options import Crops
from fastcore_ops.data.transforms import device_stage
from fastcore_ops.data.transforms.flips import AlternatingFlipOptions
from fastcore_ops.data.transforms.registry import augmentations, batch_augmentations
from fastcore_ops.data.transforms.resize import ProgressiveResize
from fastcore_ops.training.config import TrainConfig, override
from fastcore_ops.training.methods import augmix, cutout
from fastcore_ops.training.methods.base import Event, TrainState
from fastcore_ops.training.methods.mixup import MixUp
from fastcore_ops.training.methods.registry import plan_methods

ROOT = Path(__file__).resolve().parents[3]
BACKENDS = [
    pytest.param("pil", id="pil"),
    pytest.param("dali", id="dali", marks=pytest.mark.skipif(dali_available() is not None,
                                                             reason=f"DALI: {dali_available()}")),
]
# The step augmentations of one run (MixUp and CutMix exclude each other; CutMix is MixUp's twin in the step).
STEP_METHODS = ["methods.augmix={}", "methods.cutout={}", "methods.mixup={}"]


@pytest.fixture
def touched(monkeypatch):
    """The names of the stages, in the order they first touch a batch."""
    order: list[str] = []

    def recording(name, original):
        def wrapped(*args, **kwargs):
            if name not in order:
                order.append(name)
            return original(*args, **kwargs)
        return wrapped

    monkeypatch.setattr(ProgressiveResize, "size", recording("progressive_resize", ProgressiveResize.size))
    for backend in (pil, dali):
        monkeypatch.setattr(backend, "alternating_flip", recording("alternating_flip", backend.alternating_flip))
    monkeypatch.setattr(device_stage, "resize_batch", recording("resize", device_stage.resize_batch))
    monkeypatch.setattr(device_stage, "flip_batch", recording("flip", device_stage.flip_batch))
    monkeypatch.setattr(device_stage.DeviceAugment, "_normalize",
                        recording("normalize", device_stage.DeviceAugment._normalize))
    for entry in batch_augmentations():
        monkeypatch.setattr(entry.options, "apply", recording(entry.name, entry.options.apply))
    monkeypatch.setattr(augmix, "augmix_batch", recording("augmix", augmix.augmix_batch))
    monkeypatch.setattr(cutout, "cutout_batch", recording("cutout", cutout.cutout_batch))
    monkeypatch.setattr(MixUp, "mix_batch", staticmethod(recording("mixup", MixUp.mix_batch)))
    return order


def _train_one_batch(backend: str, tree, **loader_options) -> None:
    """One training batch through the loader, then the trainer's step methods' AFTER_DATALOADER, as a run fires it."""
    loader = build_loader(tree, batch_size=8, image_size=32, train=True, seed=0, backend=backend,
                          num_workers=0 if backend == "pil" else 1, crops=Crops(scale=(1.0, 1.0)),
                          **{entry.name: entry.options() for entry in batch_augmentations()}, **loader_options)
    [(images, labels)] = list(loader)
    model = torch.nn.Linear(1, 1)
    state = TrainState(model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                       scaler=torch.amp.GradScaler("cpu", enabled=False), device=torch.device("cpu"), num_classes=2,
                       steps_per_epoch=1, total_steps=1, inputs=images, targets=labels)
    for method in plan_methods(override(TrainConfig(), STEP_METHODS)).hooks:
        method.run(Event.AFTER_DATALOADER, state)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("flips", ["alternating", "random"])
def test_the_stages_touch_a_batch_in_the_registered_order(touched, coded_tree, backend, flips):
    tree = coded_tree(classes=2, per_class=4, size=40)
    if flips == "alternating":
        _train_one_batch(backend, tree, alternating_flip=AlternatingFlipOptions(),
                         progressive_resize=ProgressiveResize(initial_scale=0.5), epochs=1)
    else:
        _train_one_batch(backend, tree)
    expected = {"resize", *(entry.name for entry in batch_augmentations()), "normalize", "augmix", "cutout", "mixup"}
    expected |= {"progressive_resize", "alternating_flip"} if flips == "alternating" else {"flip"}
    assert set(touched) == expected, "every stage that is on touched the batch"
    assert touched == [entry.name for entry in augmentations() if entry.name in expected]


def test_the_listing_holds_every_place_whatever_was_imported_before():
    # A fresh interpreter that imported nothing of the trainer: the step augmentations are listed all the same.
    listing = ("from fastcore_ops.data.transforms.registry import augmentations, loader_augmentations; "
               "print([entry.name for entry in augmentations()]); "
               "print([entry.runs_in for entry in loader_augmentations()])")
    done = subprocess.run([sys.executable, "-c", listing], capture_output=True, text=True, check=True, cwd=ROOT)
    every, loader_places = (ast.literal_eval(line) for line in done.stdout.splitlines())
    assert every == [entry.name for entry in augmentations()]
    assert {"augmix", "cutout", "mixup", "cutmix"} <= set(every)
    assert set(loader_places) == {"decoder", "batch"}
    with pytest.raises(ValueError, match="runs_in must be one of decoder, batch, step or None, got 'lunch'"):
        augmentations("lunch")
