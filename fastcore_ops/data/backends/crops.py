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


def crop_box(plan: CropPlan, width: int, height: int, *, seed: int, epoch: int,
             key: tuple[int, ...]) -> tuple[float, float, float, float]:
    """``plan``'s box for one crop of a ``width`` x ``height`` image, seeded as :func:`crop_rng` seeds it.

    The generator is made only when the box depends on its draws: seeding one costs more than
    copying a kept 32 px crop, and CIFAR's recipes crop the whole image every time.

    >>> crop_box(CropPlan(32, train=True, scale=(1.0, 1.0)), 32, 32, seed=0, epoch=3, key=(7,))
    (0, 0, 32, 32)
    """
    fixed = plan.fixed_box(width, height)
    return fixed if fixed is not None else plan._drawn_box(width, height, crop_rng(seed, epoch, key))


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
        fixed = self.fixed_box(width, height)
        return fixed if fixed is not None else self._drawn_box(width, height, rng)

    def fixed_box(self, width: int, height: int) -> tuple[float, float, float, float] | None:
        """The box where no draw can change it, else None: the evaluation crop, and in training the
        whole of a square image when ``scale`` is (1, 1) and ``ratio`` admits 1 (every draw of an
        area that large either fits only as the whole image or falls back to it).

        >>> CropPlan(32, train=True, scale=(1.0, 1.0)).fixed_box(32, 32)
        (0, 0, 32, 32)
        >>> CropPlan(32, train=True).fixed_box(32, 32) is None
        True
        """
        if not self.train:
            side = self.size * min(width, height) / round(self.size / self.eval_crop_fraction)
            left, top = (width - side) / 2, (height - side) / 2
            return left, top, left + side, top + side
        if self.scale[0] >= 1.0 and width == height and self.ratio[0] <= 1.0 <= self.ratio[1]:
            return 0, 0, width, height
        return None

    def _drawn_box(self, width: int, height: int, rng: random.Random) -> tuple[int, int, int, int]:
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
