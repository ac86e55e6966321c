"""Decode only the pixels a crop reads from a JPEG, through the C extension ``_jpeg_region``.

A random-resized crop keeps about half of a photo; libjpeg-turbo can skip the inverse DCT and
colour conversion of the rest (see _jpeg_region.c for how, and why not Pillow or simplejpeg).
The pixels are libjpeg's own, so a crop resized from them equals one resized from a whole decode.
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np
from PIL import Image

try:
    from fastcore_ops.data.backends.workers import _jpeg_region
except ImportError:  # built by `pip install` where libjpeg's headers are; optional (setup.py)
    _jpeg_region = None

Box = tuple[float, float, float, float]

# Columns libjpeg may add on each side when it widens a region to whole iMCUs (at most 4 x 8).
_IMCU_SLACK = 32


class RegionDecoderMissingWarning(UserWarning):
    """The region decoder was not built; the pil backend decodes whole JPEGs (slower)."""


@functools.cache
def warn_if_missing() -> None:
    """Warn once per process when the C extension is missing."""
    if _jpeg_region is None:
        warnings.warn(
            "fastcore_ops' JPEG region decoder is not built, so the pil backend decodes whole JPEGs; "
            "install libjpeg's headers (Debian: libjpeg62-turbo-dev), then build it: `make` in the repository "
            "(it rebuilds a missing extension), or `pip install -e .` into your own environment.",
            RegionDecoderMissingWarning,
            stacklevel=3,
        )


def decode_region(data: bytes, scale: int, scaled_size: tuple[int, int], box: Box, size: int, *,
                  known_whole: bool = False) -> tuple[Image.Image, Box] | None:
    """The RGBX pixels a bilinear resize of ``box`` to ``size`` reads, and ``box`` in their coordinates.

    scale: libjpeg's DCT scaling denominator (1, 2, 4 or 8); ``scaled_size`` the image's size at
    it and ``box`` a crop in that image's pixels. known_whole: the file decoded to its end
    without a complaint before, so the data below the region is not read (about 10% sooner).
    None when the extension is missing or the JPEG is CMYK; ValueError with libjpeg's message
    when it reports a problem (even a warning).

    >>> image, box = decode_region(data, 2, (250, 188), (10.0, 20.0, 110.0, 120.0), 64)  # doctest: +SKIP
    >>> image.resize((64, 64), Image.Resampling.BILINEAR, box=box)                        # doctest: +SKIP
    """
    if _jpeg_region is None:
        return None
    # A bilinear filter reads up to one source pixel per output pixel beyond the box's edges
    # (Pillow's resample); two more keep libjpeg's edge upsampling out of the pixels used.
    margin = math.ceil(max(box[2] - box[0], box[3] - box[1]) / size) + 2
    left, top = max(0, math.floor(box[0]) - margin), max(0, math.floor(box[1]) - margin)
    right = min(scaled_size[0], math.ceil(box[2]) + margin)
    bottom = min(scaled_size[1], math.ceil(box[3]) + margin)
    width, height = right - left, bottom - top
    out = np.empty((height + 1) * min(scaled_size[0], width + 2 * _IMCU_SLACK) * 4, dtype=np.uint8)  # a spare row
    decoded = _jpeg_region.decode_region(data, scale, left, top, width, height, out, not known_whole)
    if decoded is None:
        return None
    out_left, out_width = decoded
    image = Image.frombuffer("RGBX", (out_width, height), out, "raw", "RGBX", 0, 1)  # shares `out`
    return image, (box[0] - out_left, box[1] - top, box[2] - out_left, box[3] - top)
