"""GPU data pipeline: decode with DALI or Pillow(-SIMD), augment the batch on the device.

    >>> from fastcore_ops.data import build_loader, RandAugmentOptions
    >>> loader = build_loader("/data/imagenet/train", batch_size=256, train=True, image_size=176,
    ...                       device="cuda", randaugment=RandAugmentOptions(depth=1))   # doctest: +SKIP
"""

from .colout import ColOutOptions, colout_batch
from .device_stage import DeviceAugment, flip_batch
from .flips import AlternatingFlipOptions
from .loader import Loader, SkippedImagesWarning, build_loader
from .padded_crop import PaddedCropOptions, padded_crop_batch
from .randaugment import RandAugmentOptions, randaugment_batch
from .resize import ProgressiveResize, resize_batch
from .sources import DatasetScanWarning

__all__ = [
    "build_loader", "Loader", "SkippedImagesWarning", "DatasetScanWarning",
    "randaugment_batch", "colout_batch", "resize_batch", "flip_batch", "padded_crop_batch",
    "RandAugmentOptions", "ColOutOptions", "PaddedCropOptions", "ProgressiveResize", "DeviceAugment",
    "AlternatingFlipOptions",
]
