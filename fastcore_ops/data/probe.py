"""Cheap structural checks of encoded image bytes, run before any decoder sees them.

Decoders differ in what they do with broken files: Pillow raises, libjpeg-turbo may warn and
fill the missing rows with grey, nvJPEG may abort a whole batch. Checking the bytes first lets
every backend skip the same files for the same reasons, at almost no cost (the bytes are read
anyway). A file that passes may still fail to decode; backends catch that too.
"""

from __future__ import annotations

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
