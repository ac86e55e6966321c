"""The pil backend's crop cache: later epochs copy the crops whose box repeats, and the batches stay the same."""

import pytest
import torch

from fastcore_ops.data.backends import pil as pil_backend
from fastcore_ops.data.backends.workers.crop_cache import CropCache
from fastcore_ops.data.loader import build_loader
from fastcore_ops.data.loader_options import Crops
from fastcore_ops.data.transforms.padded_crop import PaddedCropOptions
from fastcore_ops.data.transforms.resize import ProgressiveResize
from tests.training.conftest import link_cifar_subset


@pytest.fixture(scope="module")
def cifar(tmp_path_factory):
    return link_cifar_subset(tmp_path_factory.mktemp("crop-cache"), train_per_class=6, test_per_class=2)


def _epochs(source, count, **options):
    """``count`` epochs of batches, and the cache of this process's decoding."""
    loader = build_loader(source, batch_size=12, image_size=32, seed=3, **options)
    batches = []
    for epoch in range(count):
        loader.set_epoch(epoch)
        batches.append([(images.clone(), labels.clone()) for images, labels in loader])
    cache = loader._backend._loader.dataset.cache
    loader.close()
    return batches, cache


def _same(first, second):
    return all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
               for epoch_a, epoch_b in zip(first, second, strict=True) for a, b in zip(epoch_a, epoch_b, strict=True))


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("options", [
    dict(train=True, crops=Crops(scale=(1.0, 1.0)), padded_crop=PaddedCropOptions()),
    # Sizes 16, 20, 24 and 32 over 6 epochs: each size's crops are kept and reused at that size.
    dict(train=True, crops=Crops(scale=(1.0, 1.0)), progressive_resize=ProgressiveResize(delay_fraction=0.4), epochs=6),
    dict(train=False),
], ids=["whole-image crops", "progressive resizing", "evaluation"])
def test_kept_crops_give_the_batches_a_decode_gives(cifar, workers, options, monkeypatch):
    decodes = []
    crop_at = pil_backend.crop_at
    monkeypatch.setattr(pil_backend, "crop_at", lambda *args, **kw: decodes.append(crop_at(*args, **kw)) or decodes[-1])
    root = cifar / ("train" if options["train"] else "test")
    cached, cache = _epochs(root, 6, num_workers=workers, **options)
    decoded, _ = _epochs(root, 6, num_workers=workers, crop_cache_mb=0, **options)
    assert _same(cached, decoded)
    if workers == 0:  # decoded in this process: each crop decoded once, kept, and then copied
        served = sum(len(labels) for epoch in cached for _, labels in epoch)
        kept = decodes[: len(decodes) - served]  # the uncached run decodes every image it serves
        assert cache.used_bytes == sum(crop.nbytes for crop in kept) and len(kept) < served
        if "progressive_resize" not in options:  # one size: each image decoded in the first epoch only
            assert len(kept) == served / 6


def test_a_later_epoch_reads_no_file_and_random_crops_keep_nothing(cifar, monkeypatch):
    reads = []
    read = pil_backend.read_encoded
    monkeypatch.setattr(pil_backend, "read_encoded", lambda path: reads.append(path) or read(path))
    loader = build_loader(cifar / "train", batch_size=12, image_size=32, train=True, crops=Crops(scale=(1.0, 1.0)),
                          num_workers=0)
    for epoch in range(2):
        loader.set_epoch(epoch)
        reads.clear()
        assert sum(len(labels) for _, labels in loader) == 60
    assert reads == []
    _, cache = _epochs(cifar / "train", 2, train=True, num_workers=0)  # random-resized crops
    assert cache.used_bytes == 0


def test_a_crop_is_counted_once_and_the_budget_is_never_passed():
    cache = CropCache(budget_bytes=3 * 4 * 4 * 2)
    crop = torch.zeros(3, 4, 4, dtype=torch.uint8).numpy()
    for path in ("a", "a", "b", "c"):
        cache.put(path, (4, 4), (0, 0, 4, 4), 4, crop)
    assert cache.used_bytes == 96 and cache.get("c", (0, 0, 4, 4), 4) is None and cache.get("b", (0, 0, 4, 4), 4) is not None
