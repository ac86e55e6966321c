"""The ``dali`` decoding backend: NVIDIA DALI decodes, crops and resizes, PyTorch receives uint8 batches.

Python reads each run's encoded bytes in the caller's order, drops the files ``probe`` rejects
and draws the training crop windows; a DALI pipeline then decodes only the crop window (the
crop is fused into decoding), resizes it and lays it out as CHW, on the GPU ("mixed" decoders)
when the device is CUDA and on the CPU otherwise. Because the windows come from Python, seeded
by ``(seed, epoch, sample position)``, a crop does not depend on thread timing, on which other
files were skipped or on a pipeline restart.

DALI is imported lazily, so this module imports without it; ``dali_available()`` says why it
cannot be used.
"""

from __future__ import annotations

import functools
import io
import logging
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError

from fastcore_ops.data.backends.crops import CropPlan, crop_box
from fastcore_ops.data.backends.decoded import (
    DecodedBatch,
    RunPlan,
    SkippedFile,
    give_up_if_nothing_decodes,
    replacement_candidates,
)
from fastcore_ops.data.backends.probe import image_format, jpeg_truncation, unusable_reason
from fastcore_ops.data.shards import read_encoded
from fastcore_ops.data.transforms.flips import alternating_flip

log = logging.getLogger(__name__)

_INSTALL_HINT = ("install it with `pip install nvidia-dali-cuda130` for CUDA 13, or `pip install nvidia-dali-cuda120` "
                 "for CUDA 12")


@functools.cache
def dali_available() -> str | None:
    """None when DALI imports and runs a pipeline here, else the reason and the fix.

    >>> dali_available() is None or "pip install" in dali_available()
    True
    """
    try:
        from nvidia.dali import fn, pipeline_def, types
    except ImportError as error:
        return f"NVIDIA DALI cannot be imported ({error}); {_INSTALL_HINT}"

    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def smoke_test():
        return fn.cast(fn.external_source(source=lambda: [np.zeros(1, np.uint8)], batch=True), dtype=types.INT32)

    try:
        pipeline = smoke_test()
        pipeline.build()
        pipeline.run()
    except Exception as error:  # DALI raises plain RuntimeErrors for missing libraries and drivers
        return f"NVIDIA DALI is installed but cannot run a pipeline here ({error}); reinstall it: {_INSTALL_HINT}"
    return None


class _Unusable(Exception):
    """A file to leave out of its batch; the message is the reason."""


def _load(path: str, verified: set[str]) -> tuple[bytes, int, int]:
    """The file's encoded bytes with its (width, height), or _Unusable with the reason.

    ``verified``: the files that already passed. A JPEG not among them gets ``jpeg_truncation``'s
    decode (about 1 ms per ImageNet photo), because DALI decodes one whose data ends early without
    a word; so each file pays it once per backend, in its first epoch.
    """
    try:
        data = read_encoded(path)
    except OSError as error:
        raise _Unusable(f"cannot read ({error.strerror or error})") from None
    reason = unusable_reason(data)
    if reason is None and path not in verified and image_format(data) == "jpeg":
        reason = jpeg_truncation(data)
    if reason is not None:
        raise _Unusable(reason)
    verified.add(path)
    try:
        # Pillow reads only the header here, no pixels.
        with Image.open(io.BytesIO(data)) as image:
            width, height = image.size
    except UnidentifiedImageError:
        raise _Unusable("unreadable image header (Pillow does not recognize it)") from None
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as error:
        raise _Unusable(f"unreadable image header ({error})") from None
    return data, width, height


@dataclass
class _FedRun:
    """A run the feeder has handed to DALI (or found empty): what the consumer needs to yield it."""

    index: int
    kept: list[str]
    skipped: list[SkippedFile]


@dataclass
class _FeedBatch:
    """What one call of the feeder hands to DALI, gathered file by file."""

    size: int
    kept: list[str] = field(default_factory=list)
    encoded: list[np.ndarray] = field(default_factory=list)
    labels: list[np.ndarray] = field(default_factory=list)
    windows: list[tuple[int, int, int, int]] = field(default_factory=list)
    mirrors: list[bool] = field(default_factory=list)

    def add(self, path: str, data: bytes, label: int, window: tuple[int, int, int, int] | None,
            mirror: bool) -> None:
        self.kept.append(path)
        self.encoded.append(np.frombuffer(data, np.uint8))
        self.labels.append(np.array(label, np.int64))
        if window is not None:
            self.windows.append(window)
            self.mirrors.append(mirror)

    def outputs(self, with_windows: bool) -> tuple:
        """Encoded bytes and labels; in training also each crop's anchor and shape, the run's output size and
        whether each crop is mirrored."""
        if not with_windows:
            return self.encoded, self.labels
        anchors = [np.array(window[:2], np.int32) for window in self.windows]
        shapes = [np.array(window[2:], np.int32) for window in self.windows]
        sizes = [np.array([self.size, self.size], np.float32)] * len(self.windows)
        mirrors = [np.array(mirror, np.int32) for mirror in self.mirrors]
        return self.encoded, self.labels, anchors, shapes, sizes, mirrors


@dataclass
class _RunFeeder:
    """The pipeline's external source: each call returns the next non-empty run's bytes, crop windows and labels.

    ``samples`` is cut into runs of ``batch_size``, fed from run ``next_run`` on; run ``i`` is
    decoded at side ``size_of(i)``.
    ``draw_window(width, height, key)`` gives a crop window (x, y, w, h) from a crop key
    (decoded.py); None decodes whole images. ``mirrored(path)``: whether that file's crop is
    mirrored (alternating flips, data/transforms/flips.py). With ``refill``, stand-ins take the places of
    skipped files (decoded.py). Runs whose files were all skipped are not sent to DALI (it cannot
    carry an empty batch); they wait in ``fed`` so the consumer yields them, empty, in place.
    """

    samples: list[tuple[str, int]]
    batch_size: int
    next_run: int
    size_of: Callable[[int], int]
    draw_window: Callable[[int, int, tuple[int, ...]], tuple[int, int, int, int]] | None
    mirrored: Callable[[str], bool]
    refill: bool
    undecodable: dict[str, str]
    verified: set[str]
    fed: deque[_FedRun] = field(default_factory=deque)

    @property
    def exhausted(self) -> bool:
        return self.next_run * self.batch_size >= len(self.samples)

    def __call__(self):
        while not self.exhausted:
            index = self.next_run
            self.next_run += 1
            start = index * self.batch_size
            run = self.samples[start : start + self.batch_size]
            batch, skipped = _FeedBatch(self.size_of(index)), []
            for position, (path, label) in enumerate(run, start):
                reason = self._add(batch, path, label, (position,))
                if reason is not None:
                    skipped.append(SkippedFile(str(path), reason))
            if self.refill and skipped:
                self._add_stand_ins(batch, start, len(run), skipped)
            self.fed.append(_FedRun(index, batch.kept, skipped))
            if batch.kept:
                return batch.outputs(with_windows=self.draw_window is not None)
        raise StopIteration

    def _add(self, batch: _FeedBatch, path: str, label: int, key: tuple[int, ...]) -> str | None:
        """Add one file to ``batch``; the reason it cannot be added, or None."""
        try:
            if path in self.undecodable:
                raise _Unusable(self.undecodable[path])
            data, width, height = _load(path, self.verified)
        except _Unusable as reason:
            return str(reason)
        window = self.draw_window(width, height, key) if self.draw_window is not None else None
        batch.add(path, data, label, window, self.mirrored(path))
        return None

    def _add_stand_ins(self, batch: _FeedBatch, start: int, length: int, skipped: list[SkippedFile]) -> None:
        for key, (path, label) in replacement_candidates(self.samples, start, length):
            if len(batch.kept) == length:
                return
            give_up_if_nothing_decodes(key, len(batch.kept), len(self.samples), skipped)
            self._add(batch, path, label, key)  # a stand-in that fails is named where its own run reaches it


class DaliBackend:
    """Decodes ``(path, label)`` runs into uint8 NCHW batches with a DALI pipeline.

    Training: random-resized crop (``crop_scale``, ``crop_ratio``) decoded directly, resized to
    ``image_size``. Evaluation: shorter side to ``round(image_size / eval_crop_fraction)``, center
    ``image_size`` square. ``num_workers`` is DALI's thread count. build_loader validates the
    arguments, as for the pil backend.

    >>> backend = DaliBackend(batch_size=2, train=True, image_size=32, device="cpu", seed=0, num_workers=1)
    >>> samples = [(red_jpeg, 3), (red_jpeg, 5)]   # red_jpeg: a JPEG file's path
    >>> [(tuple(b.images.shape), b.labels.tolist()) for b in backend.batches(samples, epoch=0)]
    [((2, 3, 32, 32), [3, 5])]
    """

    def __init__(
        self,
        *,
        batch_size: int,
        train: bool,
        image_size: int,
        device: str | torch.device,
        seed: int,
        num_workers: int,
        crop_scale: tuple[float, float] = (0.08, 1.0),
        crop_ratio: tuple[float, float] = (3 / 4, 4 / 3),
        eval_crop_fraction: float = 0.875,
        alternating_flip: bool = False,
    ):
        reason = dali_available()
        if reason is not None:
            raise RuntimeError(f"the dali backend cannot run: {reason}; or use the pil backend")
        self.device = torch.device(device)
        self._crop_plan = CropPlan(image_size, train=True, scale=crop_scale, ratio=crop_ratio)
        self.batch_size = batch_size
        self.train = train
        self.image_size = image_size
        self.seed = seed
        self.num_workers = num_workers
        self.alternating_flip = alternating_flip and train
        self.eval_resize = round(image_size / eval_crop_fraction)
        # The files that passed _load's checks, so the JPEG decode check runs once per file. It
        # holds the sample list's own path strings: a set entry per file, about 50 MB for ImageNet.
        self._verified: set[str] = set()

    def close(self) -> None:
        """Nothing to release: each :meth:`batches` call builds its own pipeline and ends it; here for the
        backend contract (the pil backend's close stops its workers)."""

    def batches(self, samples: list[tuple[str, int]], epoch: int, first_batch: int = 0,
                plans: list[RunPlan] | None = None) -> Iterator[DecodedBatch]:
        """One DecodedBatch per run of ``batch_size`` consecutive samples, in order, from run ``first_batch``.

        plans: one per run from ``first_batch`` on (decoded.py). A training run is resized to its
        planned size inside the pipeline, as a per-sample input, so a size that changes from run
        to run never rebuilds the pipeline; evaluation runs are always ``image_size``.

        A file that fails the byte check, has an unreadable header or makes DALI fail is left
        out of its batch and named in that batch's ``skipped``; the other labels stay with their
        images. In training, stand-ins keep the batch at its run's length (decoded.py).

        >>> backend = DaliBackend(batch_size=2, train=True, image_size=32, device="cpu", seed=0, num_workers=1)
        >>> samples = [(red_jpeg, 0), ("missing.jpg", 1), (red_jpeg, 2)]   # red_jpeg: a JPEG file's path
        >>> batches = backend.batches(samples, epoch=3)
        >>> [(tuple(b.images.shape), b.labels.tolist(), list(map(str, b.skipped))) for b in batches]
        [((2, 3, 32, 32), [0, 2], ['missing.jpg: cannot read (No such file or directory)']), ((1, 3, 32, 32), [2], [])]
        """
        sizes = [plan.size for plan in plans] if plans else []

        def size_of(run: int) -> int:
            return sizes[run - first_batch] if sizes else self.image_size

        return self._batches(samples, epoch, first_batch, size_of)

    def _batches(self, samples: list[tuple[str, int]], epoch: int, next_run: int,
                 size_of: Callable[[int], int]) -> Iterator[DecodedBatch]:
        undecodable: dict[str, str] = {}
        # A DALI pipeline that hit a decoding error is unusable (later outputs can be stale), so
        # a failure costs a fresh pipeline that resumes at the failed run, minus the culprits.
        # Building one takes milliseconds, so each epoch gets its own: no state leaks between
        # epochs or from a consumer that stopped early.
        while next_run * self.batch_size < len(samples):
            draw_window = functools.partial(self._crop_window, epoch) if self.train else None
            feeder = _RunFeeder(samples, self.batch_size, next_run, size_of, draw_window,
                                functools.partial(self._mirrored, epoch), self.train, undecodable, self._verified)
            try:
                for images, labels, fed in self._decoded(feeder):
                    next_run = fed.index + 1
                    yield DecodedBatch(images, labels, fed.skipped)
            except _PipelineFailure as failure:
                suspects = [path for fed in failure.pending for path in fed.kept]
                culprits = self._undecodable(suspects)
                if not culprits:
                    raise failure.error
                log.warning("DALI could not decode %d file(s); skipping them: %s", len(culprits), culprits)
                undecodable.update(culprits)

    def _decoded(self, feeder: _RunFeeder):
        """(images, labels, fed run) per run, empty runs included; _PipelineFailure if DALI fails."""
        from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

        try:
            iterator = DALIGenericIterator(
                self._pipeline(feeder), ["images", "labels"], last_batch_policy=LastBatchPolicy.PARTIAL
            )
        except RuntimeError as error:
            if feeder.exhausted and not any(fed.kept for fed in feeder.fed):
                # Every file was skipped, so DALI got no batch to build its first outputs from.
                yield from self._empty_runs(feeder)
                return
            raise _PipelineFailure(error, list(feeder.fed)) from error
        while True:
            try:
                outputs = next(iterator)[0]
            except StopIteration:
                break
            except RuntimeError as error:
                raise _PipelineFailure(error, list(feeder.fed)) from error
            yield from self._empty_runs(feeder)
            yield outputs["images"], outputs["labels"].reshape(-1), feeder.fed.popleft()
        yield from self._empty_runs(feeder)

    def _empty_runs(self, feeder: _RunFeeder):
        while feeder.fed and not feeder.fed[0].kept:
            size = self.image_size
            empty_images = torch.empty((0, 3, size, size), dtype=torch.uint8, device=self.device)
            yield empty_images, torch.empty(0, dtype=torch.int64, device=self.device), feeder.fed.popleft()

    def _crop_window(self, epoch: int, width: int, height: int, key: tuple[int, ...]) -> tuple[int, int, int, int]:
        # The same generator as the pil backend's for the same crop key, so both crop alike.
        left, top, right, bottom = crop_box(self._crop_plan, width, height, seed=self.seed, epoch=epoch, key=key)
        return left, top, right - left, bottom - top

    def _mirrored(self, epoch: int, path: str) -> bool:
        return self.alternating_flip and alternating_flip(path, self.seed, epoch)

    @property
    def _on_gpu(self) -> bool:
        return self.device.type == "cuda"

    def _pipeline_kwargs(self, batch_size: int, prefetch: int) -> dict:
        device_id = None
        if self._on_gpu:
            device_id = self.device.index if self.device.index is not None else torch.cuda.current_device()
        return dict(
            batch_size=batch_size, num_threads=self.num_workers, device_id=device_id, prefetch_queue_depth=prefetch
        )

    def _decoder_args(self, types) -> dict:
        # EXIF orientation is ignored: crop windows are drawn on the stored pixel grid the
        # header reports, and Pillow-based loaders also see the unrotated pixels.
        return dict(device="mixed" if self._on_gpu else "cpu", output_type=types.RGB, adjust_orientation=False)

    def _pipeline(self, feeder: _RunFeeder):
        from nvidia.dali import fn, pipeline_def, types

        @pipeline_def(**self._pipeline_kwargs(self.batch_size, prefetch=2))
        def decode_crop_resize():
            # Training also takes each crop window's anchor (x, y) and shape (w, h), in pixels, the
            # run's output size and whether each crop is mirrored.
            dtypes = [types.UINT8, types.INT64] + ([types.INT32, types.INT32, types.FLOAT, types.INT32]
                                                   if self.train else [])
            encoded, labels, *window = fn.external_source(
                source=feeder, num_outputs=len(dtypes), batch=True, dtype=dtypes
            )
            decoder = self._decoder_args(types)
            size = self.image_size
            if self.train:
                anchor, shape, sizes, mirror = window
                # Integer anchor and shape are absolute pixels, in the default "WH" axis order.
                images = fn.decoders.image_slice(encoded, anchor, shape, **decoder)
                images = fn.resize(images, size=sizes, antialias=True)
                crop = dict(mirror=mirror)
            else:
                images = fn.decoders.image(encoded, **decoder)
                images = fn.resize(images, resize_shorter=self.eval_resize, antialias=True)
                crop = dict(crop=[size, size], crop_pos_x=0.5, crop_pos_y=0.5)
            # uint8 CHW with no normalization and no mirror but alternating flips' (data/transforms/flips.py): the
            # device stage flips at random and normalizes after RandAugment and ColOut, which work on raw pixels.
            images = fn.crop_mirror_normalize(images, dtype=types.UINT8, output_layout="CHW", **crop)
            return images, labels.gpu() if self._on_gpu else labels

        return decode_crop_resize()

    def _undecodable(self, paths: list[str]) -> dict[str, str]:
        """The files among ``paths`` DALI's decoder rejects, with the reason; decoded one at a time."""
        from nvidia.dali import fn, pipeline_def, types

        @pipeline_def(**self._pipeline_kwargs(1, prefetch=1))
        def decode_one():
            encoded = fn.external_source(name="encoded", dtype=types.UINT8, ndim=1)
            return fn.decoders.image(encoded, **self._decoder_args(types))

        culprits = {}
        pipeline = None
        for path in paths:
            if pipeline is None:
                pipeline = decode_one()
                pipeline.build()
            try:
                pipeline.feed_input("encoded", [np.frombuffer(read_encoded(path), np.uint8)])
                pipeline.run()
            except RuntimeError:
                culprits[path] = "DALI's decoder rejects it"  # DALI's message names no cause
                pipeline = None  # broken by the error; see batches()
        return culprits


class _PipelineFailure(Exception):
    """DALI failed while runs ``pending`` were fed but not yet yielded."""

    def __init__(self, error: RuntimeError, pending: list[_FedRun]):
        super().__init__(str(error))
        self.error = error
        self.pending = pending
