"""Where each backend crops: the training random-resized crop and the evaluation center crop.

One definition for both backends, so ``pil`` and ``dali`` draw the same windows from the same
seeds and differ only in how they decode.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from fastcore_ops.data.order import mix_seed


def crop_rng(seed: int, epoch: int, key: tuple[int, ...]) -> random.Random:
    """The generator of one crop: ``key`` is ``(position,)`` in the epoch's order, or a stand-in's key.

    Seeded per crop, so a crop depends on nothing but (seed, epoch, key): not on the worker or
    thread that decodes it, nor on which other files were skipped, nor on the backend.

    >>> crop_rng(0, 1, (5,)).random() == crop_rng(0, 1, (5,)).random() != crop_rng(0, 2, (5,)).random()
    True
    """
    return random.Random(mix_seed(seed, epoch, *key))


@dataclass(frozen=True)
class CropPlan:
    """Where to crop an image of a given size, in its own pixel coordinates.

    Training: a random-resized crop (area fraction in ``scale``, aspect ratio in ``ratio``).
    Evaluation: the center square that remains after resizing the shorter side to
    ``round(size / eval_crop_fraction)`` and center-cropping ``size``.
    """

    size: int
    train: bool
    scale: tuple[float, float] = (0.08, 1.0)
    ratio: tuple[float, float] = (3 / 4, 4 / 3)
    eval_crop_fraction: float = 0.875

    def box(self, width: int, height: int, rng: random.Random) -> tuple[float, float, float, float]:
        """(left, top, right, bottom) of the crop."""
        if not self.train:
            side = self.size * min(width, height) / round(self.size / self.eval_crop_fraction)
            left, top = (width - side) / 2, (height - side) / 2
            return left, top, left + side, top + side
        crop_w, crop_h = self._random_crop_size(width, height, rng)
        left, top = rng.randint(0, width - crop_w), rng.randint(0, height - crop_h)
        return left, top, left + crop_w, top + crop_h

    def _random_crop_size(self, width: int, height: int, rng: random.Random) -> tuple[int, int]:
        # Area uniform in `scale`, aspect log-uniform in `ratio`; ten tries, then the whole image
        # cut to the nearest allowed aspect (the Inception crop, as torchvision draws it).
        log_low, log_high = math.log(self.ratio[0]), math.log(self.ratio[1])
        for _ in range(10):
            area = width * height * rng.uniform(*self.scale)
            aspect = math.exp(rng.uniform(log_low, log_high))
            crop_w, crop_h = round(math.sqrt(area * aspect)), round(math.sqrt(area / aspect))
            if 0 < crop_w <= width and 0 < crop_h <= height:
                return crop_w, crop_h
        aspect = width / height
        if aspect < self.ratio[0]:
            return width, max(1, round(width / self.ratio[0]))
        if aspect > self.ratio[1]:
            return max(1, round(height * self.ratio[1])), height
        return width, height
