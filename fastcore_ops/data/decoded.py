"""What a decoding backend hands to the device stage: one batch of uint8 crops and its labels.

Every backend (``pil``, ``dali``) implements the same small contract, so the loader and the
on-device augmentations never know which one decoded the images:

    backend = Backend(batch_size=..., train=..., image_size=..., device=..., seed=..., num_workers=...,
                      crop_scale=(0.08, 1.0), crop_ratio=(3 / 4, 4 / 3), eval_crop_fraction=0.875)
    for batch in backend.batches(samples, epoch):   # samples: this rank's (path, label) list, in order
        ...                                          # batch: DecodedBatch

A backend keeps the order of ``samples``, cuts it into runs of ``batch_size`` consecutive
samples (the last may be shorter) and yields one ``DecodedBatch`` per run. Training crops are
random-resized crops (``crop_scale``, ``crop_ratio``) drawn reproducibly from ``(seed, epoch)``;
evaluation resizes the shorter side to ``round(image_size / eval_crop_fraction)`` and takes the
center ``image_size`` square. Flips, RandAugment, ColOut, progressive resizing and the
normalization are the device stage's, not the backend's: the backend ships uint8 pixels, a
quarter of the bytes of float32 across the host-to-device link.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class DecodedBatch:
    """One decoded batch.

    images: uint8 tensor (n, 3, image_size, image_size), contiguous NCHW, RGB, on the loader's device.
    labels: int64 tensor (n,) on the same device; ``labels[i]`` is the label of the file ``images[i]`` came from.
    skipped: paths from this batch's run of samples that could not be decoded and were left out
        (so ``n`` may be smaller than the run), each with the reason, as ``"path: reason"``.
    """

    images: torch.Tensor
    labels: torch.Tensor
    skipped: list[str] = field(default_factory=list)
