"""The ``pil`` backend: decode and crop with Pillow (Pillow-SIMD when installed) in DataLoader workers.

Why not torchvision's ImageFolder + RandomResizedCrop: that decodes every photo at full size,
then crops and resizes it, then makes one float tensor per image. Here the crop box is chosen
from the header first, so a JPEG that will be shrunk 2x, 4x or 8x anyway is decoded at that
scale by libjpeg's DCT-domain downscaling, and only around the crop (workers/jpeg_region.py: the rows
outside it are entropy-decoded, nothing more); crop and resize are one Pillow call; and each
worker writes a whole batch into one uint8 array.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import io
import math
import os
import random
import warnings
from dataclasses import dataclass, replace

import numpy as np
import PIL
import torch
from PIL import Image, features
from torch.utils.data import DataLoader, Dataset, Sampler

from fastcore_ops.data.backends.crops import CropPlan, crop_box
from fastcore_ops.data.backends.decoded import (
    DecodedBatch,
    RunPlan,
    SkippedFile,
    give_up_if_nothing_decodes,
    replacement_candidates,
)
from fastcore_ops.data.backends.probe import (
    image_format,
    jpeg_truncation,
    may_be_truncated_jpeg,
    truncation_reason,
    unusable_reason,
)
from fastcore_ops.data.backends.workers.crop_cache import CropCache
from fastcore_ops.data.backends.workers.jpeg_region import Box, decode_region, warn_if_missing
from fastcore_ops.data.backends.workers.read_ahead import ReadAhead
from fastcore_ops.data.backends.workers.shared_slots import SharedBatchSlots
from fastcore_ops.data.backends.workers.worker_stop import WorkerStop, in_worker, starting_workers
from fastcore_ops.data.shards import ShardMember, read_encoded
from fastcore_ops.data.transforms.device_stage import DeviceAugment
from fastcore_ops.data.transforms.flips import alternating_flip
from fastcore_ops.host_memory import keep_freed_memory

# Pillow first shrinks by an integer factor with a box filter, then resamples the rest; at a gap
# of 3 the result is visually the same as a full antialiased resize and measurably faster.
REDUCING_GAP = 3.0

_SIXTEEN_BIT_MODES = ("I;16", "I;16L", "I;16B", "I;16N", "I")

# Batches each DataLoader worker may have on their way to the main process (torch's default).
_PREFETCH = 2


class PillowSimdMissingWarning(UserWarning):
    """Plain Pillow is in use where the faster Pillow-SIMD was expected."""


def pillow_simd_version() -> str | None:
    """The installed Pillow-SIMD version, or None when the imported PIL is plain Pillow.

    >>> pillow_simd_version() in (None, PIL.__version__)   # e.g. '12.1.1.post0' after `make`
    True
    """
    try:
        simd = importlib.metadata.version("pillow-simd")
    except importlib.metadata.PackageNotFoundError:
        return None
    # Installing plain Pillow over Pillow-SIMD overwrites the PIL package but leaves Pillow-SIMD's
    # metadata behind; the imported module's version tells which one is really in use.
    return simd if PIL.__version__ == simd else None


@functools.cache
def warn_if_no_pillow_simd() -> None:
    """Warn once per process when the imported Pillow is not Pillow-SIMD."""
    if pillow_simd_version() is None:
        warnings.warn(
            f"the pil backend runs on plain Pillow {PIL.__version__}, not Pillow-SIMD; decoding is slower. "
            "Run `make` (its setup installs Pillow-SIMD after the project) to get it.",
            PillowSimdMissingWarning,
            stacklevel=3,
        )


@functools.cache
def _decodes_webp() -> bool:
    # Pillow-SIMD built from source lacks WebP when libwebp's headers were missing at build time.
    return bool(features.check("webp"))


class UnusableImage(Exception):
    """An image file that cannot be decoded into RGB pixels; the message says why."""


def decode_crop(data: bytes, plan: CropPlan, rng: random.Random, *, known_whole: bool = False) -> np.ndarray:
    """Decode encoded image bytes to a (size, size, 3) uint8 RGB crop, or raise UnusableImage.

    known_whole: these bytes were decoded before without being found truncated, so a JPEG's
    data past the crop need not be read again.

    >>> crop = decode_crop(open("cat.jpg", "rb").read(), CropPlan(176, train=True), random.Random(0))  # doctest: +SKIP
    >>> crop.shape, crop.dtype                                                                      # doctest: +SKIP
    ((176, 176, 3), dtype('uint8'))
    """
    image = open_for_crop(data)
    return crop_at(data, image, plan.box(*image.size, rng), plan.size, known_whole=known_whole)


def open_for_crop(data: bytes) -> Image.Image:
    """The image in ``data`` with only its header read (its size and format), or UnusableImage."""
    reason = unusable_reason(data)
    if reason is not None:
        raise UnusableImage(reason)
    if image_format(data) == "webp" and not _decodes_webp():
        raise UnusableImage(
            "WebP, which this Pillow build cannot decode; install libwebp-dev and rebuild Pillow-SIMD "
            "(delete .venv/pillow-simd and run `python tools/install_pillow_simd.py`), or use the dali backend"
        )
    with _unusable_on_any_error():
        return Image.open(io.BytesIO(data))


def crop_at(data: bytes, image: Image.Image, box: Box, size: int, *, known_whole: bool = False) -> np.ndarray:
    """The (size, size, 3) uint8 RGB crop of ``box`` in ``image`` (from :func:`open_for_crop` of ``data``)."""
    with _unusable_on_any_error():
        decoded, box = _decoded_for_crop(image, data, box, size, known_whole)
        crop = decoded.resize((size, size), Image.Resampling.BILINEAR, box=box, reducing_gap=REDUCING_GAP)
        return np.asarray(crop)[..., :3]  # RGB, or RGBX from the region decoder


@contextlib.contextmanager
def _unusable_on_any_error():
    try:
        yield
    except UnusableImage:
        raise
    # Pillow's format plugins raise many exception types on malformed files (OSError,
    # SyntaxError, ValueError, struct.error, IndexError, DecompressionBombError, ...); whatever
    # one file raises, that file is unusable and the epoch goes on.
    except Exception as error:  # noqa: BLE001
        raise UnusableImage(f"{type(error).__name__}: {error}") from error


def _decoded_for_crop(image: Image.Image, data: bytes, box: Box, size: int,
                      known_whole: bool = False) -> tuple[Image.Image, Box]:
    """The pixels of ``image`` that a resize of ``box`` to ``size`` reads, and ``box`` in their coordinates.

    Decoded at the smallest DCT scale (1, 1/2, 1/4, 1/8) that leaves the crop at least ``size``
    wide and high. JPEGs in YCbCr or grey go to the region decoder (workers/jpeg_region.py), which
    decodes only around the crop and reports any complaint of libjpeg's: a truncated file is
    skipped, one with another complaint (stray bytes between markers, say) is decoded by Pillow
    as it always was. So are CMYK JPEGs and every other format.
    """
    full_size = image.size
    wanted = (math.ceil(full_size[0] * size / (box[2] - box[0])), math.ceil(full_size[1] * size / (box[3] - box[1])))
    if image.format == "JPEG" and image.mode in ("RGB", "L"):
        scale = _dct_scale(full_size, wanted)
        scaled_size = (-(-full_size[0] // scale), -(-full_size[1] // scale))  # libjpeg rounds up
        try:
            region = decode_region(data, scale, scaled_size, _scaled(box, full_size, scaled_size), size,
                                   known_whole=known_whole)
        except ValueError as error:
            reason = truncation_reason(error)
            if reason is not None:
                raise UnusableImage(reason) from error
            region = None
        if region is not None:
            return region
    image.draft("RGB", wanted)  # the same DCT scaling for a JPEG; a no-op for other formats
    _reject_truncated_jpeg(image, data)
    return to_rgb(image), _scaled(box, full_size, image.size)


def _scaled(box: Box, from_size: tuple[int, int], to_size: tuple[int, int]) -> Box:
    """``box`` in the pixels of the image resized from ``from_size`` to ``to_size``."""
    sx, sy = to_size[0] / from_size[0], to_size[1] / from_size[1]
    return box[0] * sx, box[1] * sy, box[2] * sx, box[3] * sy


def _dct_scale(image_size: tuple[int, int], wanted: tuple[int, int]) -> int:
    """The denominator Pillow's ``draft`` picks: the largest of 8, 4, 2, 1 that keeps both sides at least ``wanted``."""
    fits = min(image_size[0] // wanted[0], image_size[1] // wanted[1])
    return next(scale for scale in (8, 4, 2, 1) if scale <= max(fits, 1))


def _reject_truncated_jpeg(image: Image.Image, data: bytes) -> None:
    """Raise UnusableImage for a JPEG whose compressed data ends early; decodes ``image`` (in draft mode).

    Pillow hides libjpeg's warning, so the decoded pixels say when to ask the decoder (probe.py).
    """
    if image.format != "JPEG":
        return
    image.load()
    last_pixel = image.getpixel((image.width - 1, image.height - 1))
    if may_be_truncated_jpeg(last_pixel, progressive=bool(image.info.get("progressive"))):
        reason = jpeg_truncation(data)
        if reason is not None:
            raise UnusableImage(reason)


def to_rgb(image: Image.Image) -> Image.Image:
    """The image as 8-bit RGB: 16-bit gray scaled (not clipped), alpha dropped; UnusableImage for float images."""
    if image.mode == "RGB":
        return image
    if image.mode in _SIXTEEN_BIT_MODES:
        # Pillow's own conversion clips 16-bit values at 255 (a nearly white image); scale instead.
        # Mode "I" is how Pillow opens 16-bit grayscale from some formats.
        wide = np.clip(np.asarray(image).astype(np.int64), 0, 65535)
        gray = ((wide * 255 + 32767) // 65535).astype(np.uint8)
        return Image.fromarray(gray, mode="L").convert("RGB")
    if image.mode == "F":
        raise UnusableImage("floating-point image (mode F): no agreed 8-bit scale")
    # L, LA, P, PA, RGBA, CMYK, YCbCr, 1: Pillow's conversions (CMYK inversion for Adobe JPEGs
    # is handled by its JPEG plugin at load time). Alpha is dropped, as torchvision's loader does.
    return image.convert("RGB")


@dataclass(frozen=True)
class _Run:
    """One batch's work order: its samples, where they start in the epoch's order, its size and augmentation seed."""

    samples: list[tuple[str | ShardMember, int]]
    start: int
    epoch: int
    plan: RunPlan


class _RunDecoding(Dataset):
    """Decodes and collates a whole ``_Run`` per item, so a worker hands over one batch at once.

    With a ``stage`` (the batch stage, on a CPU) a whole run is augmented here too, into one of
    the worker's ``slots`` when it has them; a training run that lost files is handed over as
    decoded, for the caller to refill, then augment. Each item is (batch, slot or None).
    """

    def __init__(self, plan: CropPlan, seed: int, stage: DeviceAugment | None, refill: bool,
                 slots: SharedBatchSlots | None, crop_cache_bytes: int = 0, alternating_flip: bool = False):
        self.plan, self.seed, self.stage, self.refill, self.slots = plan, seed, stage, refill, slots
        self.alternating_flip = alternating_flip
        # The files this process decoded without finding them truncated (each worker has its own
        # copy); a truncated file never gets in, so it is checked, and skipped, every epoch.
        self.known_whole: set[str | ShardMember] = set()
        # Crops whose box repeats every epoch (workers/crop_cache.py); random-resized crops' boxes do not.
        repeats = not plan.train or plan.scale == (1.0, 1.0)
        self.cache = CropCache(crop_cache_bytes if repeats else 0)
        self._plans = {plan.size: plan}
        # Used where this process decodes its own batches (PilBackend.batches begins it); a file with a kept
        # crop is mostly not read again, so only files never kept are read ahead.
        self.read_ahead = ReadAhead(read_encoded, wanted=self._never_kept)
        self._read_files: dict[str | ShardMember, bytes | Exception] = {}  # the current run's, read ahead

    def _never_kept(self, path: str | ShardMember) -> bool:
        return self.cache.image_size(path) is None

    def __getitem__(self, run: _Run) -> tuple[DecodedBatch, int | None]:
        self._read_files = self.read_ahead.take(run.start)
        size = run.plan.size
        images = np.empty((len(run.samples), 3, size, size), dtype=np.uint8)
        labels, skipped = [], []
        for position, (path, label) in enumerate(run.samples, run.start):
            try:
                images[len(labels)] = self.decode(path, run.epoch, (position,), size)
            except (UnusableImage, OSError) as error:
                skipped.append(SkippedFile(str(path), str(error)))
                continue
            labels.append(label)
        batch = DecodedBatch(torch.from_numpy(images[: len(labels)]), torch.tensor(labels, dtype=torch.int64), skipped)
        if self.refill and skipped:
            return batch, None
        return self.augmented(batch, run.plan, self.slots)

    def augmented(self, batch: DecodedBatch, plan: RunPlan,
                  slots: SharedBatchSlots | None = None) -> tuple[DecodedBatch, int | None]:
        """(``batch`` through the stage if this backend runs it and the batch is not empty, the slot it is in)."""
        if self.stage is None or len(batch.labels) == 0:
            return batch, None
        generator = torch.Generator().manual_seed(plan.augment_seed)
        out, slot = None, None
        if slots is not None:
            out, slot = slots.empty(torch.Size((len(batch.labels), 3, plan.size, plan.size)), self.stage.memory_format)
        images = self.stage(batch.images, size=plan.size, generator=generator, out=out)
        return DecodedBatch(images, batch.labels, batch.skipped, augmented=True), slot

    def _plan_at(self, size: int) -> CropPlan:
        # One plan per size progressive resizing asks for, made once rather than at every image.
        plan = self._plans.get(size)
        if plan is None:
            plan = self._plans[size] = replace(self.plan, size=size)
        return plan

    def decode(self, path: str | ShardMember, epoch: int, key: tuple[int, ...], size: int) -> np.ndarray:
        """One file's (3, size, size) uint8 crop, mirrored in the epochs transforms/flips.py gives it with
        alternating flips (it may be a view of a kept crop: do not write to it); or UnusableImage / OSError."""
        crop = self._crop(path, epoch, key, size)
        if self.alternating_flip and alternating_flip(path, self.seed, epoch):
            return crop[:, :, ::-1]
        return crop

    def _crop(self, path: str | ShardMember, epoch: int, key: tuple[int, ...], size: int) -> np.ndarray:
        plan = self._plan_at(size)
        image_size = self.cache.image_size(path)
        if image_size is not None:
            box = crop_box(plan, *image_size, seed=self.seed, epoch=epoch, key=key)
            kept = self.cache.get(path, box, size)
            if kept is not None:
                return kept
        data = self._read_files.pop(path, None)
        if isinstance(data, Exception):
            raise data
        if data is None:
            data = read_encoded(path)
        image = open_for_crop(data)
        if image_size is None:
            box = crop_box(plan, *image.size, seed=self.seed, epoch=epoch, key=key)
        crop = crop_at(data, image, box, size, known_whole=path in self.known_whole).transpose(2, 0, 1)
        self.known_whole.add(path)
        self.cache.put(path, image.size, box, size, crop)
        return crop


# How far below the process that reads the batches the decoding workers run when the batches go
# to the CPU. There the workers share the cores with the training step, whose threads wait for
# each other at the end of every operation: a worker that takes a core mid-step stalls them all,
# and a worker is woken each time the step takes a batch, as the forward pass starts. Ten steps
# down, the kernel's scheduler gives a worker about a tenth of a core it contends for, so it
# decodes mostly in the step's gaps. On a 2-core machine 10 trained fastest of 0, 5, 10 and 19;
# at 19 the workers fell behind and the step waited for data (measured: docs/results.md).
CPU_WORKER_NICENESS = 10


def default_worker_niceness(device: torch.device) -> int:
    """The workers' niceness when none is chosen: CPU_WORKER_NICENESS for batches on the CPU, else 0
    (a GPU step leaves the cores to the workers).

    >>> default_worker_niceness(torch.device("cuda")), default_worker_niceness(torch.device("cpu"))
    (0, 10)
    """
    return CPU_WORKER_NICENESS if device.type == "cpu" else 0


def _start_worker(worker_id: int, niceness: int, stop, owner_process: int) -> None:
    """A worker's start: its batches' buffers reuse the last batch's pages (host_memory.py says why),
    it runs ``niceness`` steps below the process that started it, and it leaves when told through
    ``stop`` or when ``owner_process`` is gone (passing stop signals on meanwhile: workers/worker_stop.py)."""
    keep_freed_memory()
    os.nice(niceness)
    in_worker(stop, owner_process)


class _Runs(Sampler):
    """The current epoch's runs; the sampler's "indices" are the runs themselves, sent to the workers."""

    def __init__(self):
        self.runs: list[_Run] = []

    def __iter__(self):
        return iter(self.runs)

    def __len__(self) -> int:
        return len(self.runs)


def default_num_workers() -> int:
    """One worker per core this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class PilBackend:
    """Decode with Pillow(-SIMD) in ``num_workers`` DataLoader workers (the contract is in decoded.py).

    build_loader validates the arguments; ``num_workers=0`` decodes in the calling process.
    ``worker_niceness``: how far below the calling process the workers run (default
    :func:`default_worker_niceness`). ``alternating_flip``: mirror training images as data/transforms/flips.py says.

    >>> backend = PilBackend(batch_size=64, train=True, image_size=176, seed=0)      # doctest: +SKIP
    >>> batch = next(iter(backend.batches(samples, epoch=0)))                          # doctest: +SKIP
    >>> batch.images.shape, batch.images.dtype                                         # doctest: +SKIP
    (torch.Size([64, 3, 176, 176]), torch.uint8)
    """

    def __init__(
        self,
        *,
        batch_size: int,
        train: bool,
        image_size: int,
        device: torch.device | str | None = None,
        seed: int = 0,
        num_workers: int | None = None,
        crop_scale: tuple[float, float] = (0.08, 1.0),
        crop_ratio: tuple[float, float] = (3 / 4, 4 / 3),
        eval_crop_fraction: float = 0.875,
        stage: DeviceAugment | None = None,
        crop_cache_mb: int = 0,
        worker_niceness: int | None = None,
        alternating_flip: bool = False,
    ):
        warn_if_no_pillow_simd()
        warn_if_missing()
        self.batch_size = batch_size
        self.image_size = image_size
        self.device = torch.device(device if device is not None else "cpu")
        self.num_workers = default_num_workers() if num_workers is None else num_workers
        if worker_niceness is None:
            worker_niceness = default_worker_niceness(self.device)
        plan = CropPlan(image_size, train, tuple(crop_scale), tuple(crop_ratio), eval_crop_fraction)
        self._refill = train  # decoded.py: training batches keep their length, evaluation counts each image once
        self._runs = _Runs()
        self._slots = None
        if stage is not None and self.num_workers > 0:
            # A worker's slots: the batches it may have in flight, and one the consumer holds.
            self._slots = SharedBatchSlots(self.num_workers, slots_per_worker=_PREFETCH + 1)
        self._worker_stop = WorkerStop(self)
        # One DataLoader for the backend's life: its workers persist across epochs (no start-up
        # cost per epoch) and receive each epoch's runs through the sampler. PyTorch gives each
        # worker one intra-op thread, so a stage run there never oversubscribes the cores.
        self._loader = DataLoader(
            _RunDecoding(plan, seed, stage, self._refill, self._slots, crop_cache_bytes=crop_cache_mb * 2**20,
                         alternating_flip=alternating_flip),
            sampler=self._runs,
            batch_size=None,  # items are already batches
            num_workers=self.num_workers,
            prefetch_factor=_PREFETCH if self.num_workers > 0 else None,
            persistent_workers=self.num_workers > 0,
            pin_memory=self.device.type == "cuda",
            # Its own generator: starting workers draws a base seed, which must not advance the
            # global torch RNG that stochastic depth draws from (a resumed run would diverge).
            generator=torch.Generator().manual_seed(seed),
            worker_init_fn=functools.partial(_start_worker, niceness=worker_niceness, stop=self._worker_stop.watched,
                                             owner_process=self._worker_stop.owner_process),
        )

    def close(self) -> None:
        """Stop the decoding workers now; the backend cannot decode afterwards.

        Without it they stop when the backend is collected (workers/worker_stop.py says why that is ours).
        """
        self._worker_stop.stop()
        self._loader = None

    def batches(self, samples: list[tuple[str, int]], epoch: int, first_batch: int = 0,
                plans: list[RunPlan] | None = None):
        """Yield one DecodedBatch per run of ``batch_size`` consecutive samples, in order, from run ``first_batch``.

        plans: one per run from ``first_batch`` on (decoded.py); None decodes at ``image_size``.
        """
        if self._loader is None:
            raise RuntimeError("this backend was closed; make a new one")
        starts = range(first_batch * self.batch_size, len(samples), self.batch_size)
        plans = plans or [RunPlan(self.image_size, 0)] * len(starts)
        self._runs.runs = [_Run(samples[start : start + self.batch_size], start, epoch, plan)
                           for start, plan in zip(starts, plans, strict=True)]
        if self._slots is not None:
            self._slots.reclaim(keep_latest=False)
        if self.num_workers == 0:  # decoded here, between the steps: read the next runs' files meanwhile
            self._loader.dataset.read_ahead.begin([(run.start, [path for path, _ in run.samples])
                                                   for run in self._runs.runs])
        with starting_workers():  # the first epoch's iter() forks the workers
            loaded = iter(self._loader)
        for run, (batch, slot) in zip(self._runs.runs, loaded):
            if slot is not None:
                self._slots.hand_over(batch.images, slot)
            if self._refill and len(batch.labels) < len(run.samples):
                batch, _ = self._loader.dataset.augmented(self._refilled(batch, run, samples), run.plan)
            yield batch.to(self.device)
            if self._slots is not None:
                self._slots.reclaim(keep_latest=True)

    def _refilled(self, batch: DecodedBatch, run: _Run, samples) -> DecodedBatch:
        """The run's batch filled up to the run's length with stand-ins (decoded.py says which).

        Decoded here in the calling process, where the epoch's whole sample list is: it happens
        only for broken files, and the workers keep decoding the next runs meanwhile.
        """
        decoding = self._loader.dataset
        extra_images, extra_labels = [], []
        found = len(batch.labels)
        for key, (path, label) in replacement_candidates(samples, run.start, len(run.samples)):
            if found + len(extra_labels) == len(run.samples):
                break
            give_up_if_nothing_decodes(key, found + len(extra_labels), len(samples), batch.skipped)
            try:
                extra_images.append(decoding.decode(path, run.epoch, key, run.plan.size))
            except (UnusableImage, OSError):
                continue  # named where its own run reaches it
            extra_labels.append(label)
        # np.stack copies the crops (read-only views of Pillow's pixels or of kept crops) into one
        # writable array, which torch.from_numpy may then share without a warning.
        return DecodedBatch(torch.cat([batch.images, torch.from_numpy(np.stack(extra_images))]),
                            torch.cat([batch.labels, torch.tensor(extra_labels)]), batch.skipped)
