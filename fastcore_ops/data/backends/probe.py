"""Is an image file whole? Cheap structural checks of its bytes, and libjpeg's word on JPEGs.

Decoders differ in what they do with broken files: Pillow raises, libjpeg-turbo may warn and
fill the missing rows with grey, nvJPEG may abort a whole batch. Checking the bytes first lets
every backend skip the same files for the same reasons, at almost no cost (the bytes are read
anyway). A file that passes may still fail to decode; backends catch that too.

One break no byte check can see: a JPEG cut inside its compressed data and closed again with an
end-of-image marker (a copy that stopped early, then "repaired"). Only decoding finds where the
data runs out, and libjpeg then only warns ("premature end of data segment"), fills the rest
with zeros (a flat grey band) and returns; Pillow silences that warning and DALI prints it
without failing. ``jpeg_truncation`` decodes with libjpeg-turbo through ``simplejpeg`` in strict
mode, which turns the warning into an error. It decodes at 1/8 scale in one channel, but the
compressed data must still be read in full, so it costs about two thirds of the pil backend's
whole decode and crop (0.97 ms against 1.41 ms per ImageNet photo on the 2-core machine). The
backends therefore call it only where it is needed: the dali backend once per file, in the first
epoch; the pil backend never on the JPEGs its region decoder reads (that decode is strict and
reads the data to its end, so it reports the truncation itself, in ``truncation_reason``'s
words), and on the rest (CMYK JPEGs, files libjpeg warns about otherwise) only where Pillow's
decode shows the sign (``may_be_truncated_jpeg``, about 1.4 us per image).

``simplejpeg`` is a dependency of the package; where it is missing (a bare environment, as on a
GPU machine that runs the repository without installing it) the check is skipped, with a warning.
"""

from __future__ import annotations

import functools
import warnings

try:
    import simplejpeg
except ImportError:  # the environment has not installed the package's dependencies
    simplejpeg = None

# Formats both Pillow and DALI decode. GIF is left out: DALI cannot decode it.
_SIGNATURES = {
    "jpeg": (b"\xff\xd8\xff",),
    "png": (b"\x89PNG\r\n\x1a\n",),
    "bmp": (b"BM",),
    "tiff": (b"II*\x00", b"MM\x00*"),
}

# A JPEG ends with the end-of-image marker FF D9; some writers append padding or metadata after
# it, so look for it near the end rather than at the last two bytes. Entropy-coded data stuffs
# every FF with 00, so FF D9 cannot appear there by chance.
_JPEG_TAIL = 1024


def image_format(data: bytes) -> str | None:
    """The format the bytes' signature names ("jpeg", "png", "bmp", "tiff", "webp"), or None.

    >>> image_format(b"\\x89PNG\\r\\n\\x1a\\n...")
    'png'
    """
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    for name, signatures in _SIGNATURES.items():
        if data.startswith(signatures):
            return name
    return None


def unusable_reason(data: bytes) -> str | None:
    """Why these encoded bytes cannot be a whole image, or None when they look usable.

    >>> unusable_reason(b"")
    'empty file'
    """
    if not data:
        return "empty file"
    kind = image_format(data)
    if kind is None:
        return f"not an image (starts with {data[:8]!r})"
    if kind == "jpeg" and b"\xff\xd9" not in data[-_JPEG_TAIL:]:
        return "truncated JPEG (no end-of-image marker)"
    if kind == "png" and b"IEND" not in data[-12:]:
        return "truncated PNG (no IEND chunk)"
    return None


# The zeros libjpeg puts where data is missing decode to mid-grey in every channel (Adobe CMYK
# inverts it to 127), so a truncated single-scan JPEG (nearly every baseline one) ends in such a
# pixel, at every draft scale. A progressive one need not (earlier scans fill the image), so
# those are always checked.
_MISSING_DATA_LEVELS = {127, 128}


def may_be_truncated_jpeg(last_pixel: int | tuple[int, ...], progressive: bool) -> bool:
    """Whether a decoded JPEG needs ``jpeg_truncation``: it is progressive, or its last pixel is flat mid-grey.

    Almost no photo passes this sign (2 of the 10,000 CIFAR-10 test images, none of the
    ImageNet sample), so checking them costs nothing measurable.

    >>> may_be_truncated_jpeg((128, 128, 128), progressive=False), may_be_truncated_jpeg((90, 128, 128), False)
    (True, False)
    """
    levels = last_pixel if isinstance(last_pixel, tuple) else (last_pixel,)
    return progressive or set(levels) <= _MISSING_DATA_LEVELS


class TruncationCheckMissingWarning(UserWarning):
    """simplejpeg is not installed, so JPEGs cut inside their compressed data are not caught."""


@functools.cache
def _warn_no_truncation_check() -> None:
    warnings.warn("simplejpeg is not installed, so a JPEG cut inside its compressed data and closed again is not "
                  "caught: it trains as an image with a grey band; install it with `pip install simplejpeg`",
                  TruncationCheckMissingWarning, stacklevel=3)


def jpeg_truncation(data: bytes) -> str | None:
    """libjpeg's report that a JPEG's compressed data ends early, or None when it does not (or, with a
    warning, when simplejpeg is not installed to tell).

    Other decoder complaints are left to the backends' decoders, which fail on what is fatal.

    >>> import io; from PIL import Image
    >>> buffer = io.BytesIO(); Image.effect_noise((64, 64), 40).save(buffer, "JPEG")
    >>> whole = buffer.getvalue()
    >>> jpeg_truncation(whole) is None
    True
    >>> jpeg_truncation(whole[: len(whole) // 2] + b"\\xff\\xd9")
    'truncated JPEG (the decoder reports: Corrupt JPEG data: premature end of data segment)'
    """
    if simplejpeg is None:
        _warn_no_truncation_check()
        return None
    try:
        colorspace = simplejpeg.decode_jpeg_header(data)[2]
        # Gray output skips colour work; CMYK cannot be converted to gray, so it stays CMYK.
        simplejpeg.decode_jpeg(data, colorspace="CMYK" if colorspace in ("CMYK", "YCCK") else "GRAY", min_factor=8)
    except ValueError as error:
        return truncation_reason(error)
    return None


def truncation_reason(error: ValueError) -> str | None:
    """The skip reason for simplejpeg's strict-mode ``error`` when it reports missing data, else None.

    >>> truncation_reason(ValueError("Corrupt JPEG data: premature end of data segment"))
    'truncated JPEG (the decoder reports: Corrupt JPEG data: premature end of data segment)'
    """
    if "premature end" in str(error).lower():
        return f"truncated JPEG (the decoder reports: {error})"
    return None
