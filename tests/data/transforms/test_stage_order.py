"""The registered order is the order that runs: the real loader, instrumented, on both backends.

Each stage's own code is wrapped where the pipeline calls it (the decoders' alternating flips, the
batch stage's resize, its augmentations), one training batch goes through ``build_loader``, and the
order in which the stages first touched it must be the registry's order of the loader methods.
"""

import pytest
import torch

from fastcore_ops.data import build_loader
from fastcore_ops.data.backends import dali, pil
from fastcore_ops.data.backends.dali import dali_available
from fastcore_ops.data.loader_options import Crops
from fastcore_ops.data.transforms import device_stage
from fastcore_ops.data.transforms.colout import ColOutOptions
from fastcore_ops.data.transforms.flips import AlternatingFlipOptions
from fastcore_ops.data.transforms.padded_crop import PaddedCropOptions
from fastcore_ops.data.transforms.randaugment import RandAugmentOptions
from fastcore_ops.training.methods.registry import methods_of

BACKENDS = [
    pytest.param("pil", id="pil"),
    pytest.param("dali", id="dali", marks=pytest.mark.skipif(dali_available() is not None,
                                                             reason=f"DALI: {dali_available()}")),
]


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

    for backend in (pil, dali):
        monkeypatch.setattr(backend, "alternating_flip", recording("alternating_flip", backend.alternating_flip))
    monkeypatch.setattr(device_stage, "resize_batch", recording("progressive_resize", device_stage.resize_batch))
    for name, options in (("padded_crop", PaddedCropOptions), ("colout", ColOutOptions),
                          ("randaugment", RandAugmentOptions)):
        monkeypatch.setattr(options, "apply", recording(name, options.apply))
    return order


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_stages_touch_a_batch_in_the_registered_order(touched, coded_tree, backend):
    tree = coded_tree(classes=2, per_class=4, size=40)
    loader = build_loader(tree, batch_size=8, image_size=32, train=True, seed=0, backend=backend,
                          num_workers=0 if backend == "pil" else 1, crops=Crops(scale=(1.0, 1.0)),
                          alternating_flip=AlternatingFlipOptions(), padded_crop=PaddedCropOptions(),
                          colout=ColOutOptions(), randaugment=RandAugmentOptions())
    assert [images.shape[0] for images, _ in loader] == [8]
    registered = [method.name for method in methods_of("loader") if method.name in touched]
    assert touched == registered
