"""``build_loader``: normalized image batches on the device, from an ImageFolder tree or a sample list.

A loader ties four parts together: the samples (sources.py), this rank's order for the epoch
(order.py), a decoding backend that ships uint8 crops (backends/pil.py, backends/dali.py; the
contract is in backends/decoded.py) and the device stage that flips, augments and normalizes them
(transforms/device_stage.py).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence

import torch

from fastcore_ops.checks import check_bool, check_choice, check_device, check_int, check_number
from fastcore_ops.data.backends.dali import DaliBackend, dali_available
from fastcore_ops.data.backends.decoded import RunPlan, SkippedFile
from fastcore_ops.data.backends.pil import PilBackend, default_num_workers
from fastcore_ops.data.loader_options import Crops, Shard
from fastcore_ops.data.order import (
    batch_count,
    check_epoch_position,
    drop_incomplete_batch,
    epoch_order,
    mix_seed,
    samples_per_rank,
)
from fastcore_ops.data.shards import verify_shards
from fastcore_ops.data.sources import Source, find_samples
from fastcore_ops.data.transforms.device_stage import IMAGENET_MEAN, IMAGENET_STD, DeviceAugment
from fastcore_ops.data.transforms.flips import AlternatingFlipOptions
from fastcore_ops.data.transforms.resize import ProgressiveResize

log = logging.getLogger("fastcore_ops.data")

BACKENDS = ("auto", "pil", "dali")

# Each pil worker's budget for crops it keeps (backends/workers/crop_cache.py): CIFAR-10's 50,000 training images
# take 150 MB at 32 px, and about 500 MB at the five sizes of cifar_mild's progressive resizing.
CROP_CACHE_MB = 1024

# The default crops: the Inception-style random-resized crop and the 0.875 center crop of ImageNet training.
INCEPTION_CROPS = Crops()

# How many skipped files the epoch's warning names before summarizing the rest.
_NAMED_SKIPS = 10


class SkippedImagesWarning(UserWarning):
    """Some image files could not be decoded and were left out of this epoch."""


class RepeatedEpochWarning(UserWarning):
    """A training loader was iterated again without ``set_epoch``: the same order and augmentations again."""


class Loader:
    """Iterates one epoch of ``(images, labels)`` for this rank; made by ``build_loader``.

    ``images``: float32 (n, 3, S, S) normalized with the ImageNet mean and std (channels-last if
    asked), ``labels``: int64 (n,), both on the device. Unreadable files are skipped and named in
    one ``SkippedImagesWarning`` per epoch, when its iteration ends or is left (a run that stops
    mid-epoch names them too), and gathered in ``skipped_files``. Training batches keep their size
    (stand-ins take the skipped files' places, see backends/decoded.py); in evaluation a batch is that much
    smaller, and one whose every file was skipped is not yielded, so an epoch can yield fewer than
    ``len(loader)`` batches. Prepared shards are checked against their sha256 before the first
    batch (shards/format.py); a changed one raises ``ShardChecksumError``. Call ``set_epoch`` before each
    epoch to reshuffle (and to advance progressive resizing); ``first_batch`` resumes an epoch
    part-way with exactly the batches and augmentations an uninterrupted epoch has there.
    """

    def __init__(self, *, samples, classes, backend, backend_name, stage, batch_size, image_size, seed,
                 shuffle, drop_last, pad, rank, world_size, progressive_resize, epochs):
        self._samples, self.classes = samples, classes
        self._backend, self.backend = backend, backend_name
        self._stage = stage
        self.batch_size, self.image_size, self.seed = batch_size, image_size, seed
        self.shuffle, self.drop_last, self.pad = shuffle, drop_last, pad
        self.rank, self.world_size = rank, world_size
        self._progressive, self._epochs = progressive_resize, epochs
        self.epoch = 0
        self.first_batch = 0
        # Whether set_epoch was called since the last iteration began (None: never iterated), to warn once.
        self._epoch_set: bool | None = None
        self._shards_verified = False
        # Every file skipped so far, by path, with its latest reason: what a run reports at its end.
        self.skipped_files: dict[str, str] = {}

    def __len__(self) -> int:
        per_rank = samples_per_rank(len(self._samples), self.world_size, rank=self.rank, pad=self.pad)
        return batch_count(per_rank, self.batch_size, self.drop_last)

    @property
    def decoding_workers(self) -> int:
        """The processes or threads that decode its files (0: the calling process decodes them).

            >>> loader.decoding_workers  # doctest: +SKIP
            2
        """
        return 0 if self._backend is None else self._backend.num_workers

    def describe_decoding(self) -> str:
        """One line for a run's log: which backend decodes its files, and where.

            >>> loader.describe_decoding()  # doctest: +SKIP
            'decoding: pil, in this process between steps'
        """
        workers = self.decoding_workers
        if workers == 0:
            return f"decoding: {self.backend}, in this process between steps"
        return f"decoding: {self.backend}, {'threads' if self.backend == 'dali' else 'worker processes'}: {workers}"

    def set_epoch(self, epoch: int, first_batch: int = 0) -> None:
        """Use ``epoch``'s order and augmentation draws for the next iteration, starting at batch ``first_batch``."""
        check_epoch_position(epoch, first_batch, len(self))
        self.epoch, self.first_batch = epoch, first_batch
        self._epoch_set = True

    def close(self) -> None:
        """Stop the backend's decoding workers now; the loader cannot be iterated afterwards.

        Call it when training ends; a loader dropped without it stops its workers when it is collected.

            >>> loader.close()  # doctest: +SKIP
        """
        if self._backend is not None:
            self._backend.close()
        self._backend = None

    def __iter__(self):
        if self._backend is None:
            raise RuntimeError("this loader was closed; build a new one with build_loader")
        if self._epoch_set is False and (self.shuffle or self._stage.train):
            warnings.warn(f"this loader is iterated again at epoch {self.epoch} without set_epoch, so it repeats "
                          f"that epoch's order and augmentations; call loader.set_epoch(epoch) before each epoch",
                          RepeatedEpochWarning, stacklevel=2)
        self._epoch_set = False
        if not self._shards_verified:
            # Here, before the workers read anything: a changed shard stops the run with one clear
            # error, instead of an error inside a worker or images skipped and mislabelled.
            verify_shards(self._samples)
            self._shards_verified = True
        epoch = self.epoch
        order = epoch_order(len(self._samples), seed=self.seed, epoch=epoch, shuffle=self.shuffle,
                            rank=self.rank, world_size=self.world_size, pad=self.pad)
        order = drop_incomplete_batch(order, self.batch_size, self.drop_last)
        samples = [self._samples[index] for index in order]
        skipped: list[SkippedFile] = []
        runs = batch_count(len(samples), self.batch_size, drop_last=False)
        plans = [self._plan(epoch, step) for step in range(self.first_batch, runs)]
        batches = self._backend.batches(samples, epoch, self.first_batch, plans)
        try:
            for plan, batch in zip(plans, batches):
                skipped += batch.skipped
                self.skipped_files.update(batch.skipped)
                if len(batch.labels) == 0:
                    continue
                if batch.augmented:
                    yield batch.images, batch.labels
                else:
                    generator = torch.Generator().manual_seed(plan.augment_seed)
                    yield self._stage(batch.images, size=plan.size, generator=generator), batch.labels
        finally:
            # Also when the caller stops before the epoch's end (a run ends at its last step, which
            # need not be an epoch's last batch) and the generator is closed.
            if skipped:
                warnings.warn(_skipped_message(epoch, skipped), SkippedImagesWarning, stacklevel=2)

    def _plan(self, epoch: int, step: int) -> RunPlan:
        # Seeded per (seed, epoch, rank, batch): a rerun or a resumed epoch repeats its
        # augmentations, ranks differ.
        return RunPlan(self.image_size_at(epoch, step) or self.image_size, mix_seed(self.seed, epoch, self.rank, step))

    def image_size_at(self, epoch: int, step: int) -> int | None:
        """The training image size progressive resizing gives batch ``step`` of ``epoch``; None without it.

            >>> loader.image_size_at(0, 0)  # doctest: +SKIP
            88
        """
        if self._progressive is None:
            return None
        # Training past the declared number of epochs stays at the final size.
        progress = min(1.0, (epoch + step / len(self)) / self._epochs)
        return self._progressive.size(self.image_size, progress)


def _skipped_message(epoch: int, skipped: list[SkippedFile]) -> str:
    named = "; ".join(map(str, skipped[:_NAMED_SKIPS]))
    rest = f"; and {len(skipped) - _NAMED_SKIPS} more" if len(skipped) > _NAMED_SKIPS else ""
    return (f"epoch {epoch}: skipped {len(skipped)} unreadable image file(s), their labels were dropped with them: "
            f"{named}{rest}. Replace or remove these files.")


def build_loader(
    source: Source,
    *,
    batch_size: int,
    train: bool,
    image_size: int,
    device: torch.device | str | None = None,
    backend: str = "auto",
    seed: int = 0,
    shuffle: bool | None = None,
    drop_last: bool | None = None,
    pad: bool | None = None,
    num_workers: int | None = None,
    channels_last: bool = False,
    flip: bool = True,
    alternating_flip: AlternatingFlipOptions | None = None,
    progressive_resize: ProgressiveResize | None = None,
    epochs: int | None = None,
    crops: Crops = INCEPTION_CROPS,
    shard: Shard | None = None,
    crop_cache_mb: int = CROP_CACHE_MB,
    worker_niceness: int | None = None,
    mean: Sequence[float] = IMAGENET_MEAN,
    std: Sequence[float] = IMAGENET_STD,
    **augmentations: object,
) -> Loader:
    """A loader of normalized ``(images, labels)`` batches on ``device`` for one rank.

    source: an ImageFolder root (``root/<class>/<image>``) or a list of ``(path, label)`` pairs.
    train: random-resized crops, flips and the chosen augmentations; else center crops.
    crops: the training and the evaluation crops (loader_options.py); the default is ImageNet's.
    augmentations: the batch stage's augmentations by name (transforms/registry.py), each its options
        or None: ``padded_crop`` (CIFAR's padded random crop, with ``crops=Crops(scale=(1, 1))`` for
        whole images), ``colout``, ``randaugment``, ...; training only.
    flip: mirror training images, each at random with probability 1/2; with ``alternating_flip``
        each image in every other epoch instead (transforms/flips.py).
    backend: "pil", "dali" or "auto": DALI when ``device`` is CUDA and DALI runs here, else pil.
    shuffle, drop_last: default to ``train``. drop_last drops this rank's last short batch.
    pad: defaults to ``train``. With several ranks and a sample count that does not divide by
        their number, training pads every rank to the same sample count (DDP needs equal step
        counts; up to ``world_size - 1`` samples repeat), and evaluation does not (each sample is
        visited by exactly one rank, so ranks may differ by one sample and one batch); see order.py.
    num_workers: decoding processes (pil) or threads (dali); default one per core.
    progressive_resize: a training-size schedule; needs ``epochs`` (the run's length, may be fractional).
    shard: this process's ``Shard(rank, world_size)``; default from torch.distributed when
        initialized, else one process.
    crop_cache_mb: the pil backend's workers keep the crops whose box repeats every epoch (whole
        images, center crops) up to this many MB each, and copy them instead of decoding again
        (backends/workers/crop_cache.py); 0 turns it off.
    worker_niceness: how far below this process (Unix niceness, 0-19) the pil backend's decoding
        workers run; default 10 for batches on the CPU, where the workers share the cores with
        the training step and would otherwise stall it, 0 otherwise (backends/pil.py says why).
    mean, std: the per-channel (R, G, B) statistics images are normalized with, on the 0-1 scale
        of their pixels; default ImageNet's.

    >>> loader = build_loader("/data/imagenet/train", batch_size=64, train=True, image_size=176)  # doctest: +SKIP
    >>> for epoch in range(16):                                                                   # doctest: +SKIP
    ...     loader.set_epoch(epoch)
    ...     for images, labels in loader:
    ...         ...
    """
    check_int("batch_size", batch_size, low=1)
    check_int("image_size", image_size, low=1)
    check_int("seed", seed, low=0)
    if num_workers is not None:
        check_int("num_workers", num_workers, low=0)
    check_bool("train", train)
    check_bool("flip", flip)
    check_int("crop_cache_mb", crop_cache_mb, low=0)
    if worker_niceness is not None:
        check_int("worker_niceness", worker_niceness, low=0, high=19)
    for name, value in (("shuffle", shuffle), ("drop_last", drop_last), ("pad", pad)):
        check_bool(name, value, allow_none=True)
    _check_group("crops", crops, Crops, "Crops(scale=(0.5, 1.0))")
    if shard is not None:
        _check_group("shard", shard, Shard, "Shard(rank=0, world_size=2), or None")
    _check_progressive(progressive_resize, epochs, train, image_size)
    _check_alternating_flip(alternating_flip, flip, train)
    check_choice("backend", backend, BACKENDS)
    device = torch.device("cpu") if device is None else check_device("device", device)
    rank, world_size = _this_shard(shard)
    stage = DeviceAugment(train=train, flip=flip and alternating_flip is None, channels_last=channels_last,
                          mean=mean, std=std, **augmentations)

    samples, classes = find_samples(source)
    drop_last = train if drop_last is None else drop_last
    pad = train if pad is None else pad
    per_rank = samples_per_rank(len(samples), world_size, rank=rank, pad=pad)
    if drop_last and batch_count(per_rank, batch_size, drop_last) == 0:
        raise ValueError(
            f"drop_last leaves no batch: rank {rank} of {world_size} gets {per_rank} of {len(samples)} samples, "
            f"fewer than batch_size={batch_size}; lower batch_size or pass drop_last=False"
        )
    name = _choose_backend(backend, device)
    workers = default_num_workers() if num_workers is None else num_workers
    common = dict(batch_size=batch_size, train=train, image_size=image_size, device=device, seed=seed,
                  num_workers=workers, crop_scale=crops.scale, crop_ratio=crops.ratio,
                  eval_crop_fraction=crops.eval_fraction, alternating_flip=alternating_flip is not None)
    if name == "pil":
        # On a CPU the decoding workers run the batch stage too (backends/decoded.py says why).
        decoder = PilBackend(**common, stage=stage if device.type == "cpu" else None, crop_cache_mb=crop_cache_mb,
                             worker_niceness=worker_niceness)
    else:
        decoder = DaliBackend(**common)
    return Loader(
        samples=samples, classes=classes, backend=decoder, backend_name=name, stage=stage,
        batch_size=batch_size, image_size=image_size, seed=seed,
        shuffle=train if shuffle is None else shuffle, drop_last=drop_last, pad=pad,
        rank=rank, world_size=world_size, progressive_resize=progressive_resize, epochs=epochs,
    )


def _check_epochs(epochs) -> None:
    # A number, not an int: the run's length may be fractional.
    check_number("epochs", epochs, low=0, low_open=True)


def _check_progressive(progressive_resize, epochs, train: bool, image_size: int) -> None:
    if progressive_resize is None:
        if epochs is not None:
            _check_epochs(epochs)
        return
    if not isinstance(progressive_resize, ProgressiveResize):
        raise TypeError(f"progressive_resize must be a ProgressiveResize or None, got {type(progressive_resize).__name__}")
    if not train:
        raise ValueError("progressive_resize applies to training only; pass train=True or progressive_resize=None")
    if epochs is None:
        raise ValueError("progressive_resize needs epochs (the length of the run) to know how far training is; pass epochs=")
    _check_epochs(epochs)
    progressive_resize.size(image_size, 0.0)  # raises now if image_size does not fit the schedule


def _check_alternating_flip(alternating_flip, flip, train: bool) -> None:
    if alternating_flip is None:
        return
    if not isinstance(alternating_flip, AlternatingFlipOptions):
        raise TypeError(f"alternating_flip must be an AlternatingFlipOptions or None, "
                        f"got {type(alternating_flip).__name__}")
    if not train:
        raise ValueError("alternating_flip applies to training only; pass train=True or alternating_flip=None")
    if not flip:
        raise ValueError("alternating_flip says how training images are flipped, and flip=False turns flips off; "
                         "pass flip=True or alternating_flip=None")


def _check_group(name: str, value, group: type, example: str) -> None:
    if not isinstance(value, group):
        raise TypeError(f"{name} must be a {group.__name__}, got {type(value).__name__}; pass {name}={example}")


def _this_shard(shard: Shard | None) -> tuple[int, int]:
    if shard is not None:
        return shard.rank, shard.world_size
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


def _choose_backend(asked: str, device: torch.device) -> str:
    """The backend name for ``asked``; logs the choice and why when ``asked`` is "auto".

    The "auto" rule: "dali" when the device is CUDA and DALI runs a pipeline here (it decodes on
    the GPU), else "pil". On a CPU the two decode with the same libjpeg-turbo at about the same
    speed, and which one wins depends on the machine, so "auto" does not guess: pass
    ``backend="dali"`` to use DALI's CPU decoders.
    """
    if asked == "pil":
        return "pil"
    dali_reason = dali_available()
    if asked == "dali":
        if dali_reason is not None:
            raise RuntimeError(f"backend='dali' cannot run here: {dali_reason}. Fix that, or pass backend='pil'.")
        return "dali"
    if device.type != "cuda":
        log.info("backend='auto' picked 'pil': the device is %s, and DALI is chosen only to decode on a GPU", device)
        return "pil"
    if dali_reason is not None:
        log.info("backend='auto' picked 'pil': DALI is unavailable (%s)", dali_reason)
        return "pil"
    log.info("backend='auto' picked 'dali': it decodes on the GPU (%s)", device)
    return "dali"
