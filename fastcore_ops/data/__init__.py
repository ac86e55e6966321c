"""GPU data pipeline: decode with DALI or Pillow(-SIMD), augment the batch on the device.

Its rooms: ``build_loader`` (loader.py, with its option groups in loader_options.py, sources.py and
order.py) is the door; transforms/ holds the batch transforms a user imports; backends/ the two
decoders and the pil workers' machinery; shards/ the prepared-shard format that
``python -m fastcore_ops.data.prepare`` (prepare.py) writes.

    >>> from fastcore_ops.data import build_loader, RandAugmentOptions
    >>> loader = build_loader("/data/imagenet/train", batch_size=256, train=True, image_size=176,
    ...                       device="cuda", randaugment=RandAugmentOptions(depth=1))   # doctest: +SKIP
"""

from fastcore_ops.lazy import lazy_exports

# Each public name, by the module that defines it: imported on first use, so that a command of this package
# (prepare, datasets) parses its command line without torch.
_PUBLIC = {
    "loader": ["Loader", "RepeatedEpochWarning", "SkippedImagesWarning", "build_loader"],
    "loader_options": ["Crops", "Shard"],
    "sources": ["DatasetScanWarning"],
    "transforms": ["AlternatingFlipOptions", "ColOutOptions", "DeviceAugment", "PaddedCropOptions", "ProgressiveResize",
                   "RandAugmentOptions", "colout_batch", "flip_batch", "padded_crop_batch", "randaugment_batch",
                   "resize_batch"],
}
__all__, __getattr__ = lazy_exports(__name__, _PUBLIC)
