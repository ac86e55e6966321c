"""What a decoding backend hands to the device stage: one batch of uint8 crops and its labels.

Every backend (``pil``, ``dali``) implements the same small contract, so the loader and the
on-device augmentations never know which one decoded the images:

    backend = Backend(batch_size=..., train=..., image_size=..., device=..., seed=..., num_workers=...,
                      crop_scale=(0.08, 1.0), crop_ratio=(3 / 4, 4 / 3), eval_crop_fraction=0.875)
    for batch in backend.batches(samples, epoch, first_batch=0, plans=None):
        ...   # samples: this rank's (path, label) list, in order; batch: DecodedBatch

A backend keeps the order of ``samples``, cuts it into runs of ``batch_size`` consecutive
samples (the last may be shorter) and yields one ``DecodedBatch`` per run. The loader may pass
``plans``, one ``RunPlan`` per run from ``first_batch`` on: the run's image size (progressive
resizing: the backend decodes at that size, never at full size to shrink afterwards) and the
seed of its augmentations.

A file that cannot be decoded is left out and named in its batch's ``skipped``. In training, the
backend then decodes stand-ins so the batch keeps its run's length: compiled models, CUDA
graphs, Ghost BatchNorm and DDP all expect equal batches. The stand-ins are the samples that
follow the run in this epoch's order (``replacement_candidates``), wrapping around, each with a
crop of its own; which ones are used depends only on the run's position and on which files are
unusable, never on worker count or timing, so an epoch resumed at a batch gets the same batches.
A stand-in may repeat an image of the epoch (with another crop); that is the price of an equal
batch, and it is paid only for broken files. When no file of the epoch decodes, training raises
``NothingDecodesError`` (a ValueError: the dataset is bad input) instead of searching forever.
Evaluation never refills: each image counts once.

Training crops are random-resized crops (``crop_scale``, ``crop_ratio``) drawn reproducibly
from ``(seed, epoch)``; evaluation resizes the shorter side to ``round(image_size / eval_crop_fraction)`` and takes the
center ``image_size`` square. Flips, RandAugment, ColOut and the normalization are the batch
stage's (data/transforms/device_stage.py). On a GPU the backend ships uint8 pixels (a quarter of the bytes of
float32 across the host-to-device link) and the stage runs there. On a CPU a backend given the
stage runs it itself, in its decoding workers, on each batch they decoded (``augmented``): the
main process then only trains, and no two thread pools fight over the same cores.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

import torch


@dataclass(frozen=True)
class RunPlan:
    """What the loader decides for one run of samples: the side to decode it at and its augmentation seed."""

    size: int
    augment_seed: int


class SkippedFile(NamedTuple):
    """A file left out of a batch: its path (as ``str`` gives it) and why.

    >>> str(SkippedFile("cat/0.jpg", "empty file"))
    'cat/0.jpg: empty file'
    """

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


@dataclass
class DecodedBatch:
    """One decoded batch.

    images: uint8 tensor (n, 3, size, size), contiguous NCHW, RGB, on the loader's device, with
        ``size`` the run's planned size (else the backend's image_size); when ``augmented``, the
        batch stage's float32 output instead.
    labels: int64 tensor (n,) on the same device; ``labels[i]`` is the label of the file ``images[i]`` came from.
    skipped: the files of this batch's run of samples that could not be decoded and were left out,
        each with the reason. In evaluation ``n`` is then smaller than the run; in training
        stand-ins fill their places (see the module docstring).
    """

    images: torch.Tensor
    labels: torch.Tensor
    skipped: list[SkippedFile] = field(default_factory=list)
    augmented: bool = False

    def pin_memory(self) -> DecodedBatch:
        """The batch in page-locked memory (a DataLoader with ``pin_memory=True`` calls this)."""
        return DecodedBatch(self.images.pin_memory(), self.labels.pin_memory(), self.skipped, self.augmented)

    def to(self, device: torch.device) -> DecodedBatch:
        """The batch on ``device``, copied without blocking where the memory allows it."""
        return DecodedBatch(self.images.to(device, non_blocking=True), self.labels.to(device, non_blocking=True),
                            self.skipped, self.augmented)


# mix_seed pads a short list of parts with zeros, so a stand-in's crop key ends in a non-zero tag
# to never equal a sample's own key, ``(position,)``.
_STAND_IN = 1


def replacement_candidates(samples: list, start: int, length: int) -> Iterator[tuple[tuple[int, ...], tuple]]:
    """(crop key, sample) of the stand-ins for the run ``samples[start:start + length]``, in the order to try them.

    The samples after the run, wrapping around without end; a backend stops when the batch is
    full, and calls ``give_up_if_nothing_decodes`` before each try. Each key (for
    ``crops.crop_rng``) differs from every sample's own ``(position,)``, so a stand-in gets a
    crop of its own.

    >>> [(key[:2], sample) for key, sample in itertools.islice(replacement_candidates("abcde", 2, 2), 3)]
    [((2, 0), 'e'), ((2, 1), 'a'), ((2, 2), 'b')]
    """
    for attempt in itertools.count():
        yield (start, attempt, _STAND_IN), samples[(start + length + attempt) % len(samples)]


class NothingDecodesError(ValueError):
    """No file of a training epoch can be decoded, so no batch can be filled."""


def give_up_if_nothing_decodes(key: tuple[int, ...], found: int, count: int, skipped: list[SkippedFile]) -> None:
    """Raise NothingDecodesError when the stand-in with ``key`` starts a second cycle through ``count`` samples and
    none decoded.

    Without it, an epoch of only unreadable files would look for a stand-in forever.
    """
    attempt = key[1]
    if attempt >= count and found == 0:
        shown = "; ".join(map(str, skipped[:3]))
        raise NothingDecodesError(
            f"no file of this epoch's {count} samples can be decoded, so no training batch can be filled "
            f"(for example: {shown}). Check the dataset: are these image files, and readable? Replace them, or "
            f"pass the folder that holds the images"
        )
