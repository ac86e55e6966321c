"""The batch transforms a user imports: each a plain function on batch tensors and its options.

    >>> import torch
    >>> from fastcore_ops.data.transforms import colout_batch
    >>> colout_batch(torch.zeros(2, 3, 8, 8, dtype=torch.uint8), generator=torch.Generator().manual_seed(0)).shape
    torch.Size([2, 3, 7, 7])
"""

from .colout import ColOutOptions, colout_batch
from .device_stage import DeviceAugment, flip_batch
from .flips import AlternatingFlipOptions
from .padded_crop import PaddedCropOptions, padded_crop_batch
from .randaugment import RandAugmentOptions, randaugment_batch
from .resize import ProgressiveResize, resize_batch

__all__ = [
    "randaugment_batch", "colout_batch", "resize_batch", "flip_batch", "padded_crop_batch",
    "RandAugmentOptions", "ColOutOptions", "PaddedCropOptions", "ProgressiveResize", "DeviceAugment",
    "AlternatingFlipOptions",
]
