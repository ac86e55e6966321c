"""Crops a decoding worker has made before and is asked for again, kept so that it makes them once.

Where a crop's box does not change between epochs, neither do its pixels: an evaluation center
crop, and a training crop of the whole image (``Crops(scale=(1, 1))``, CIFAR's recipes) of a
square image, at each size progressive resizing asks for. Reading, parsing and decoding a 32 px
JPEG costs a worker far more than copying its 3 KB of pixels: on a 2-core AMD EPYC, a CIFAR
image took about 145 us of CPU with the batch stage, and 30 us with its crop kept. Those workers
share the cores with training. So each worker keeps
every crop it makes, keyed by (file, box, size), up to a byte budget, and later epochs copy the
kept pixels: the same bytes a decode would give, so the batches do not change. Random-resized
crops rarely repeat a box, so the pil backend keeps none of theirs.

Per worker (the workers persist across epochs and each has its own), so the memory is up to
``workers x budget``; ``crop_cache_mb=0`` in ``build_loader`` turns it off.

    >>> import numpy as np
    >>> cache = CropCache(budget_bytes=1000)
    >>> cache.put("a.jpg", (32, 32), (0, 0, 32, 32), 16, np.zeros((3, 16, 16), np.uint8))
    >>> cache.image_size("a.jpg"), cache.get("a.jpg", (0, 0, 32, 32), 16).shape
    ((32, 32), (3, 16, 16))
    >>> cache.put("b.jpg", (32, 32), (0, 0, 32, 32), 16, np.zeros((3, 16, 16), np.uint8))  # over budget
    >>> cache.get("b.jpg", (0, 0, 32, 32), 16) is None, cache.image_size("b.jpg") is None
    (True, True)
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from fastcore_ops.checks import check_int


class CropCache:
    """Crops by (file, box, size) up to ``budget_bytes`` of pixels, and the full size of each file they come from."""

    def __init__(self, budget_bytes: int):
        check_int("budget_bytes", budget_bytes, low=0)
        self.budget_bytes, self.used_bytes = budget_bytes, 0
        self._crops: dict[tuple, np.ndarray] = {}
        self._sizes: dict[Hashable, tuple[int, int]] = {}

    def image_size(self, path: Hashable) -> tuple[int, int] | None:
        """The full (width, height) of ``path`` as its last decode found it, or None if none was kept."""
        return self._sizes.get(path)

    def get(self, path: Hashable, box: tuple, size: int) -> np.ndarray | None:
        """The kept (3, size, size) crop of ``box`` in ``path``, or None. Read it, do not write to it."""
        return self._crops.get((path, box, size))

    def put(self, path: Hashable, image_size: tuple[int, int], box: tuple, size: int, crop: np.ndarray) -> None:
        """Keep ``crop`` and the file's full size if the budget has room for the crop."""
        if self.used_bytes + crop.nbytes <= self.budget_bytes and (path, box, size) not in self._crops:
            self._crops[(path, box, size)] = np.ascontiguousarray(crop)
            self._sizes[path] = image_size
            self.used_bytes += crop.nbytes
