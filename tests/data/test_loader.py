"""build_loader on the CPU with each backend: shapes, normalization, labels, seeds, epochs, shards, errors."""

import gc
import logging
import multiprocessing
import warnings

import numpy as np
import pytest
import torch
from PIL import Image

from fastcore_ops.data import loader as loader_module
from fastcore_ops.data.backends import pil as pil_backend
from fastcore_ops.data.backends.dali import dali_available
from fastcore_ops.data.backends.pil import PilBackend
from fastcore_ops.data.loader import RepeatedEpochWarning, build_loader
from fastcore_ops.data.loader_options import Crops, Shard
from fastcore_ops.data.order import epoch_order
from fastcore_ops.data.transforms.colout import ColOutOptions
from fastcore_ops.data.transforms.device_stage import DeviceAugment
from fastcore_ops.data.transforms.flips import AlternatingFlipOptions, first_flip
from fastcore_ops.data.transforms.padded_crop import PaddedCropOptions
from fastcore_ops.data.transforms.randaugment import RandAugmentOptions
from fastcore_ops.data.transforms.resize import ProgressiveResize

from tests.hang_guard import HANG_GUARD_S

from .conftest import CLASS_COLORS, IMAGENET_MEAN, IMAGENET_STD, class_of, jpeg_bytes, pixels_to_uint8

BACKENDS = [
    pytest.param("pil", id="pil"),
    pytest.param("dali", id="dali", marks=pytest.mark.skipif(dali_available() is not None, reason=f"DALI: {dali_available()}")),
]

# Sample i of the numbered tree is a flat grey of level 10 * i + 5 in class i % 3, so any crop of
# it tells which file it came from.
NUMBERED = 24
CLASSES = 3


def _loader(source, backend, **options):
    options.setdefault("batch_size", 5)
    options.setdefault("image_size", 16)
    options.setdefault("train", True)
    # The pil backend decodes in the test process (no worker start-up); DALI needs one thread.
    options.setdefault("num_workers", 0 if backend == "pil" else 1)
    return build_loader(source, backend=backend, **options)


@pytest.fixture
def numbered_tree(make_tree):
    tree = {f"c{k}": {} for k in range(CLASSES)}
    for i in range(NUMBERED):
        level = 10 * i + 5
        tree[f"c{i % CLASSES}"][f"{i:03d}.jpg"] = jpeg_bytes(Image.new("RGB", (40, 30), (level,) * 3))
    return make_tree(tree)


def _numbers(images: torch.Tensor) -> list[int]:
    """Which numbered sample each image is, from its grey level."""
    levels = pixels_to_uint8(images).mean(dim=(1, 2, 3))
    return ((levels - 5) / 10).round().int().tolist()


def _epoch(loader) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    images, labels = zip(*loader)
    return list(images), list(labels)


@pytest.mark.parametrize("backend", BACKENDS)
def test_batches_are_normalized_float_images_with_int64_labels(coded_tree, backend):
    loader = _loader(coded_tree(classes=3, per_class=4), backend, train=False, batch_size=5, image_size=24)
    assert len(loader) == 3 and loader.backend == backend and loader.classes == ["class0", "class1", "class2"]
    images, labels = _epoch(loader)
    assert [len(x) for x in images] == [5, 5, 2]
    for x, y in zip(images, labels):
        assert x.dtype == torch.float32 and x.shape[1:] == (3, 24, 24) and x.device.type == "cpu"
        assert y.dtype == torch.int64 and y.shape == (len(x),)
        low, high = (0 - IMAGENET_MEAN) / IMAGENET_STD, (1 - IMAGENET_MEAN) / IMAGENET_STD
        assert (x >= low - 1e-5).all() and (x <= high + 1e-5).all()
        # Normalization: undoing it gives back each class's colour.
        colours = pixels_to_uint8(x).mean(dim=(2, 3))
        expected = torch.tensor([CLASS_COLORS[label] for label in y.tolist()], dtype=torch.float32)
        assert (colours - expected).abs().max() < 8


def test_a_training_loader_iterated_again_without_set_epoch_says_so(coded_tree):
    tree = coded_tree(classes=2, per_class=3)
    training = _loader(tree, "pil", batch_size=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _epoch(training)
        training.set_epoch(1)
        _epoch(training)
        evaluation = _loader(tree, "pil", train=False, batch_size=2)
        _epoch(evaluation), _epoch(evaluation)  # the same images every time, as evaluation should
    with pytest.warns(RepeatedEpochWarning, match=r"iterated again at epoch 1 without set_epoch.*set_epoch\(epoch\)"):
        _epoch(training)


def test_images_are_normalized_with_the_statistics_given(coded_tree):
    """Another dataset's mean and std (here none: the pixels' own 0-1 scale), as the batches' normalization."""
    tree = coded_tree(classes=3, per_class=2)
    plain = _loader(tree, "pil", train=False, batch_size=6, image_size=24, mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0))
    images, labels = _epoch(plain)
    expected = torch.tensor([CLASS_COLORS[label] for label in labels[0].tolist()], dtype=torch.float32)
    assert ((images[0] * 255).mean(dim=(2, 3)) - expected).abs().max() < 8
    with pytest.raises(ValueError, match="std"):
        _loader(tree, "pil", train=False, batch_size=6, image_size=24, std=(0.2, 0.0, 0.2))


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_image_carries_its_own_files_label(coded_tree, backend):
    loader = _loader(coded_tree(classes=4, per_class=5), backend, batch_size=6)
    for epoch in range(2):
        loader.set_epoch(epoch)
        images, labels = _epoch(loader)
        labels = torch.cat(labels).tolist()
        assert class_of(torch.cat(images)) == labels
        assert len(labels) == 18  # 20 samples, batches of 6, the short last one dropped in training


@pytest.mark.parametrize("backend", BACKENDS)
def test_channels_last_on_request(coded_tree, backend):
    loader = _loader(coded_tree(classes=2, per_class=2), backend, channels_last=True, batch_size=2)
    images, _ = next(iter(loader))
    assert images.is_contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize("backend", BACKENDS)
def test_same_seed_repeats_and_other_seed_differs(numbered_tree, backend):
    def run(seed):
        images, labels = _epoch(_loader(numbered_tree, backend, seed=seed, batch_size=8))
        return torch.cat(images), torch.cat(labels)

    first, again, other = run(1), run(1), run(2)
    assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])
    assert _numbers(first[0]) != _numbers(other[0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_set_epoch_reshuffles_and_labels_follow_their_files(numbered_tree, backend):
    loader = _loader(numbered_tree, backend, batch_size=8)
    orders = []
    for epoch in (0, 1, 0):
        loader.set_epoch(epoch)
        images, labels = _epoch(loader)
        numbers = _numbers(torch.cat(images))
        assert sorted(numbers) == list(range(NUMBERED))
        assert torch.cat(labels).tolist() == [n % CLASSES for n in numbers]
        orders.append(numbers)
    assert orders[0] != orders[1] and orders[0] == orders[2]


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_epoch_resumed_at_a_batch_repeats_the_rest_of_that_epoch(photo_jpegs, backend):
    photos = [(path, index % 2) for index, path in enumerate(photo_jpegs(8))]
    loader = _loader(photos, backend, batch_size=2, image_size=32, randaugment=RandAugmentOptions(), seed=3)
    loader.set_epoch(1)
    images, labels = _epoch(loader)
    loader.set_epoch(1, first_batch=2)
    resumed_images, resumed_labels = _epoch(loader)
    assert len(resumed_images) == len(images) - 2
    for whole, resumed in zip(images[2:] + labels[2:], resumed_images + resumed_labels):
        assert torch.equal(whole, resumed)
    with pytest.raises(ValueError, match="first_batch must be <= len"):
        loader.set_epoch(1, first_batch=len(loader) + 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_ranks_see_disjoint_halves_that_cover_the_data(numbered_tree, backend):
    seen = []
    for rank in range(2):
        loader = _loader(numbered_tree, backend, batch_size=5, shard=Shard(rank, 2), drop_last=False)
        assert len(loader) == 3
        loader.set_epoch(3)
        images, labels = _epoch(loader)
        numbers = _numbers(torch.cat(images))
        assert len(numbers) == NUMBERED // 2
        assert torch.cat(labels).tolist() == [n % CLASSES for n in numbers]
        seen.append(set(numbers))
    assert seen[0].isdisjoint(seen[1]) and seen[0] | seen[1] == set(range(NUMBERED))


@pytest.mark.parametrize("world_size", [5, 7, 30])
def test_eval_shards_visit_every_sample_exactly_once_across_ranks(numbered_tree, world_size):
    # 24 samples over 5, 7 or 30 ranks: no padding, so no image is counted twice in top-1.
    seen = []
    for rank in range(world_size):
        loader = _loader(numbered_tree, "pil", train=False, batch_size=2, shard=Shard(rank, world_size))
        share = len(range(rank, NUMBERED, world_size))
        assert len(loader) == -(-share // 2)
        images = [x for x, _ in loader]
        assert len(images) == len(loader)
        seen += _numbers(torch.cat(images)) if images else []
    assert sorted(seen) == list(range(NUMBERED))


def test_training_shards_are_padded_to_equal_step_counts(numbered_tree):
    lengths = {len(_loader(numbered_tree, "pil", batch_size=2, shard=Shard(rank, 5))) for rank in range(5)}
    assert lengths == {2}  # ceil(24 / 5) = 5 samples each, one short batch dropped
    padded = [len(_loader(numbered_tree, "pil", train=False, pad=True, batch_size=2, shard=Shard(r, 5)))
              for r in range(5)]
    assert padded == [3] * 5


def test_eval_order_is_the_file_order_and_drop_last_defaults_to_train(numbered_tree):
    evaluation = _loader(numbered_tree, "pil", train=False, batch_size=5)
    assert len(evaluation) == 5
    images, _ = _epoch(evaluation)
    sorted_files = sorted(range(NUMBERED), key=lambda i: (i % CLASSES, i))
    assert _numbers(torch.cat(images)) == sorted_files
    training = _loader(numbered_tree, "pil", train=True, batch_size=5)
    assert len(training) == 4
    assert [len(x) for x, _ in training] == [5, 5, 5, 5]


def test_rank_and_world_size_come_from_torch_distributed_when_initialized(numbered_tree, monkeypatch):
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.distributed, "get_rank", lambda: 1)
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda: 3)
    loader = _loader(numbered_tree, "pil", batch_size=4)
    assert (loader.rank, loader.world_size, len(loader)) == (1, 3, 2)


@pytest.fixture
def half_dark_tree(make_tree):
    """Sample i: its left half black, its right half grey of level 10 * i + 5, so a crop tells which file
    it came from and whether it is mirrored."""
    tree = {f"c{k}": {} for k in range(CLASSES)}
    for i in range(NUMBERED):
        image = Image.new("RGB", (32, 32))
        image.paste((10 * i + 5,) * 3, (16, 0, 32, 32))
        tree[f"c{i % CLASSES}"][f"{i:03d}.jpg"] = jpeg_bytes(image, quality=95)
    return make_tree(tree)


def _mirrored_per_sample(images: torch.Tensor) -> dict[int, bool]:
    pixels = pixels_to_uint8(images).float().mean(dim=(1, 2))  # (n, width): the columns' mean level
    quarter = pixels.shape[1] // 4  # the outer quarters: resizing blends the columns next to the middle
    left, right = pixels[:, :quarter].mean(1), pixels[:, -quarter:].mean(1)
    numbers = ((torch.maximum(left, right) - 5) / 10).round().int().tolist()
    return dict(zip(numbers, (left > right).tolist()))


@pytest.mark.parametrize("backend", BACKENDS)
def test_alternating_flips_mirror_each_image_in_every_other_epoch(half_dark_tree, backend):
    loader = _loader(half_dark_tree, backend, image_size=16, crops=Crops(scale=(1.0, 1.0)), seed=3,
                     alternating_flip=AlternatingFlipOptions())
    seen = []
    for epoch in range(3):
        loader.set_epoch(epoch)
        mirrored = {}
        for images, _ in loader:
            mirrored.update(_mirrored_per_sample(images))
        seen.append(mirrored)
    assert all(len(mirrored) == 20 and set(mirrored) <= set(range(NUMBERED)) for mirrored in seen)  # drop_last
    for before, after in zip(seen, seen[1:]):
        assert all(after[i] != before[i] for i in set(before) & set(after)), "each image the other way round"
    paths = {int(path.stem): path for path in half_dark_tree.rglob("*.jpg")}
    assert seen[0] == {i: first_flip(str(paths[i]), seed=3) for i in seen[0]}
    assert 0 < sum(seen[0].values()) < len(seen[0]), "the first epoch's flips are coins, not all one way"


def test_progressive_resize_grows_the_images_over_the_run(coded_tree):
    schedule = ProgressiveResize(initial_scale=0.5, delay_fraction=0.5, finetune_fraction=0.25, size_increment=4)
    loader = _loader(coded_tree(classes=2, per_class=4), "pil", image_size=32, batch_size=4,
                     progressive_resize=schedule, epochs=2)
    sizes = []
    for epoch in (0, 1):
        loader.set_epoch(epoch)
        sizes.append([x.shape[-1] for x, _ in loader])
    assert sizes == [[16, 16], [16, 32]]


@pytest.mark.parametrize("backend", BACKENDS)
def test_progressive_resize_decodes_each_batch_at_its_scheduled_size(make_tree, photo_jpegs, backend, monkeypatch):
    photos = make_tree({"a": {f"{i}.jpg": path.read_bytes() for i, path in enumerate(photo_jpegs(6))}})
    decoded_pixels = []
    real_decode = pil_backend._decoded_for_crop

    def counting_decode(*args):  # the pil backend's decode: the pixels libjpeg produced
        image, box = real_decode(*args)
        decoded_pixels.append(image.size[0] * image.size[1])
        return image, box

    monkeypatch.setattr(pil_backend, "_decoded_for_crop", counting_decode)
    schedule = ProgressiveResize(initial_scale=0.25, delay_fraction=0.5, finetune_fraction=0.0, size_increment=8)
    options = dict(image_size=64, batch_size=3, seed=4)
    scheduled = _loader(photos, backend, progressive_resize=schedule, epochs=4, **options)
    assert [scheduled.image_size_at(0, step) for step in (0, 1)] == [16, 16]
    assert [x.shape[-2:] for x, _ in scheduled] == [(16, 16)] * 2
    small_pixels, decoded_pixels[:] = list(decoded_pixels), []
    assert [x.shape[-2:] for x, _ in _loader(photos, backend, **options)] == [(64, 64)] * 2
    if backend == "pil":  # the same crops at a quarter of the side: libjpeg decodes at most half the pixels
        assert len(small_pixels) == len(decoded_pixels) == 6
        assert sum(small_pixels) <= sum(decoded_pixels) / 2


def test_on_a_cpu_the_decoding_workers_run_the_batch_stage_with_the_same_draws(coded_tree, monkeypatch):
    tree = coded_tree(classes=3, per_class=4, size=48)
    options = dict(batch_size=4, image_size=32, train=True, seed=9, randaugment=RandAugmentOptions(depth=2),
                   colout=ColOutOptions(), padded_crop=PaddedCropOptions(fill="reflect"),
                   progressive_resize=ProgressiveResize(initial_scale=0.5), epochs=2)
    main_process_stage_calls = []
    real_call = DeviceAugment.__call__
    monkeypatch.setattr(DeviceAugment, "__call__",
                        lambda self, *args, **kwargs: main_process_stage_calls.append(1) or real_call(self, *args, **kwargs))
    in_workers = build_loader(tree, backend="pil", num_workers=2, **options)
    in_workers.set_epoch(1)
    batches = list(in_workers)
    in_workers.close()
    assert main_process_stage_calls == []  # every batch was augmented in a worker process
    # The same batches as decoding alone, with the stage applied here afterwards (as on a GPU).
    in_here = build_loader(tree, backend="pil", num_workers=0, **options)
    in_here.set_epoch(1)
    stage, decoder = in_here._stage, PilBackend(batch_size=4, train=True, image_size=32, seed=9, num_workers=0)
    samples = [in_here._samples[i] for i in epoch_order(12, seed=9, epoch=1, shuffle=True)]
    plans = [in_here._plan(1, step) for step in range(3)]
    for (images, labels), plan, decoded in zip(batches, plans, decoder.batches(samples, 1, 0, plans), strict=True):
        expected = real_call(stage, decoded.images, size=plan.size, generator=torch.Generator().manual_seed(plan.augment_seed))
        assert torch.equal(images, expected) and torch.equal(labels, decoded.labels)


def test_auto_logs_its_choice_and_why(coded_tree, caplog):
    with caplog.at_level(logging.INFO, logger="fastcore_ops.data"):
        loader = build_loader(coded_tree(classes=2, per_class=1), batch_size=2, train=False, image_size=16, num_workers=1)
    assert loader.backend in ("pil", "dali")
    assert any(f"picked {loader.backend!r}" in message for message in caplog.messages)


@pytest.mark.parametrize("device, dali_reason, expected", [
    ("cuda", None, "dali"),
    ("cuda:1", None, "dali"),
    ("cuda", "no DALI here", "pil"),
    ("cpu", None, "pil"),
    ("cpu", "no DALI here", "pil"),
])
def test_auto_picks_dali_only_for_a_cuda_device_where_dali_runs(monkeypatch, device, dali_reason, expected):
    monkeypatch.setattr(loader_module, "dali_available", lambda: dali_reason)
    assert loader_module._choose_backend("auto", torch.device(device)) == expected
    assert not hasattr(loader_module, "CPU_IMAGES_PER_SECOND")  # no constants measured elsewhere


def test_dali_asked_but_unavailable_gives_the_reason_and_the_fix(coded_tree, monkeypatch):
    monkeypatch.setattr(loader_module, "dali_available", lambda: "libcudart.so missing")
    with pytest.raises(RuntimeError, match="libcudart.so missing.*backend='pil'"):
        build_loader(coded_tree(classes=1, per_class=1), batch_size=1, train=True, image_size=8, backend="dali")


BAD_ARGUMENTS = [
    (dict(batch_size=0), ValueError, "batch_size must be an int >= 1, got 0"),
    (dict(image_size="224"), TypeError, "image_size must be an int >= 1, got str '224'"),
    (dict(batch_size=True), TypeError, "batch_size must be an int >= 1, got bool True"),
    (dict(batch_size=2.0), TypeError, "batch_size must be an int >= 1, got float 2.0"),
    (dict(backend="opencv"), ValueError, "backend must be one of 'auto', 'pil', 'dali', got 'opencv'"),
    (dict(seed=-1), ValueError, "seed must be an int >= 0"),
    (dict(num_workers=-2), ValueError, "num_workers must be an int >= 0"),
    (dict(train="yes"), TypeError, "train must be a bool"),
    (dict(shuffle=1), TypeError, "shuffle must be a bool or None"),
    (dict(pad="no"), TypeError, "pad must be a bool or None"),
    (dict(crops=(0.08, 1.0)), TypeError, r"crops must be a Crops, got tuple; pass crops=Crops\(scale="),
    (dict(progressive_resize=ProgressiveResize()), ValueError, "needs epochs"),
    (dict(progressive_resize=ProgressiveResize(), epochs=2, train=False), ValueError, "training only"),
    (dict(progressive_resize=ProgressiveResize(), epochs=2, image_size=30), ValueError, "multiple of size_increment"),
    (dict(progressive_resize=ProgressiveResize(), epochs=0), ValueError, "epochs must be a number > 0"),
    (dict(epochs="2"), TypeError, "epochs must be a number > 0"),
    (dict(shard=0), TypeError, r"shard must be a Shard, got int; pass shard=Shard\(rank=0, world_size=2\), or None"),
    (dict(device="toaster"), ValueError, "device 'toaster' is not a device name; use cpu, cuda or cuda:N"),
    (dict(device=0.5), TypeError, "device must be a torch.device or a name.*got float 0.5"),
    (dict(flip="no"), TypeError, "flip must be a bool"),
    (dict(alternating_flip=True), TypeError, "alternating_flip must be an AlternatingFlipOptions or None"),
    (dict(alternating_flip=AlternatingFlipOptions(), train=False), ValueError, "alternating_flip applies to training"),
    (dict(alternating_flip=AlternatingFlipOptions(), flip=False), ValueError, "pass flip=True or alternating_flip"),
    (dict(crop_cache_mb=-1), ValueError, "crop_cache_mb must be an int >= 0, got -1"),
    (dict(worker_niceness=20), ValueError, "worker_niceness must be an int in"),
    (dict(worker_niceness=-1), ValueError, "worker_niceness must be an int in"),
]


def _argument_id(options: dict) -> str:
    return ",".join(f"{k}={v!r}" if isinstance(v, (int, float, str, tuple)) else f"{k}={type(v).__name__}"
                    for k, v in options.items())


@pytest.mark.parametrize("options, error, message", BAD_ARGUMENTS,
                         ids=[_argument_id(options) for options, _, _ in BAD_ARGUMENTS])
def test_bad_arguments_are_named_before_any_work(options, error, message, tmp_path):
    # The root does not exist: argument errors must come before the scan would fail.
    arguments = dict(batch_size=4, train=True, image_size=16)
    with pytest.raises(error, match=message):
        build_loader(tmp_path / "not-scanned", **{**arguments, **options})


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on machines without CUDA")
def test_cuda_without_a_gpu_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="CUDA is not available here; use cpu"):
        build_loader(tmp_path, batch_size=4, train=True, image_size=16, device="cuda")


def test_real_photos_come_through_at_full_pipeline_settings(photo_jpegs):
    pairs = [(path, i) for i, path in enumerate(photo_jpegs(6))]
    loader = build_loader(pairs, batch_size=3, train=True, image_size=64, backend="pil", num_workers=2, seed=5)
    images, labels = _epoch(loader)
    assert [tuple(x.shape) for x in images] == [(3, 3, 64, 64)] * 2
    assert sorted(torch.cat(labels).tolist()) == list(range(6))
    pixels = pixels_to_uint8(torch.cat(images))
    # Photos, not flat fills: every crop has texture.
    assert bool((pixels.flatten(1).std(dim=1) > 5).all()) and np.isfinite(pixels.numpy()).all()


def test_drop_last_that_leaves_no_batch_is_an_error(coded_tree):
    root = coded_tree(classes=2, per_class=3)
    with pytest.raises(ValueError, match="drop_last leaves no batch: rank 0 of 2 gets 3 of 6 samples.*batch_size=4"):
        build_loader(root, batch_size=4, train=True, image_size=16, backend="pil", shard=Shard(0, 2))
    assert len(build_loader(root, batch_size=4, train=True, image_size=16, backend="pil", drop_last=False,
                            shard=Shard(0, 2))) == 1


def test_close_stops_the_decoding_workers_and_a_closed_loader_says_so(numbered_tree):
    before = set(multiprocessing.active_children())
    loader = _loader(numbered_tree, "pil", num_workers=2)
    _epoch(loader)
    workers = [child for child in multiprocessing.active_children() if child not in before]
    assert len(workers) == 2 and all(worker.is_alive() for worker in workers)  # persistent across epochs

    loader.close()

    for worker in workers:
        worker.join(timeout=HANG_GUARD_S)
    assert not any(worker.is_alive() for worker in workers)
    with pytest.raises(RuntimeError, match="loader was closed; build a new one with build_loader"):
        next(iter(loader))


@pytest.mark.parametrize(("workers", "line"), [(0, "decoding: pil, in this process between steps"),
                                               (2, "decoding: pil, worker processes: 2")])
def test_a_loader_says_where_it_decodes(numbered_tree, workers, line):
    loader = _loader(numbered_tree, "pil", num_workers=workers)
    try:
        assert loader.decoding_workers == workers and loader.describe_decoding() == line
    finally:
        loader.close()


def test_a_loader_dropped_mid_epoch_in_a_reference_cycle_lets_its_workers_go_at_once(numbered_tree):
    # As when a traceback holds the frame: PyTorch alone makes each worker wait out a 5 s join, then kills it.
    before = set(multiprocessing.active_children())
    loader = _loader(numbered_tree, "pil", num_workers=2)
    batches = iter(loader)
    next(batches)
    workers = [child for child in multiprocessing.active_children() if child not in before]
    cycle = [loader, batches]
    cycle.append(cycle)
    del loader, batches, cycle
    gc.collect()
    for worker in workers:
        worker.join()
    assert [worker.exitcode for worker in workers] == [0, 0]  # they left when told; none waited out a join and was killed
