"""Alternating flips: each training image is mirrored in every other epoch instead of at random.

With random flips an image can come in the same orientation several epochs in a row, and a
short run sees some images only one way. Jordan's fast CIFAR-10 training ("94% on CIFAR-10 in
3.29 seconds", 2024) flips each image at random in the first epoch and the other way in each
epoch after, so every pair of consecutive epochs shows both orientations of every image.

Method card
    What: in training, image ``f`` is mirrored in epoch ``e`` when ``first_flip(f) != e % 2``,
        where ``first_flip`` is a fair coin drawn once per file from the loader's seed and the
        file's class folder and name. The backends flip as they decode (the pil backend's
        decoding workers, DALI's ``crop_mirror_normalize``), so it is registered to run in the
        decoder, before every batch-stage augmentation; the batch stage's random flip is off.
    When it helps: wherever flips beat no flips, Jordan found it better than random flips, the
        more so the fewer the epochs. It changes nothing in a run of one epoch.
    Cost: none: a decoded image is copied into its batch either way.
    Options (``AlternatingFlipOptions``): none.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import PurePath

from fastcore_ops.checks import check_int
from fastcore_ops.data.shards import ShardMember
from fastcore_ops.data.transforms.registry import augmentation


# In the decoder, after the crop at the batch's size (progressive_resize) and before the padded crop's draws.
@augmentation("alternating_flip", order=5, runs_in="decoder")
@dataclass(frozen=True)
class AlternatingFlipOptions:
    """Alternating flips for the training loader (``build_loader(alternating_flip=...)``); they have no options.

    >>> AlternatingFlipOptions()
    AlternatingFlipOptions()
    """


def file_name(source: str | ShardMember) -> str:
    """What names a file the same wherever the dataset lies: a shard member's key, else "<class folder>/<file>".

    >>> file_name("/data/cifar10/train/cat/0001.jpg")
    'cat/0001.jpg'
    """
    if isinstance(source, ShardMember):
        return source.key
    if isinstance(source, str):
        # Split as strings where that gives PurePath's last two parts (no empty or "." part to drop): a
        # PurePath costs ten times more, and a loader asks for every image of every epoch.
        folder_path, _, name = source.rpartition("/")
        folder = folder_path.rpartition("/")[2]
        if folder not in ("", ".") and name not in ("", "."):
            return f"{folder}/{name}"
    return "/".join(PurePath(source).parts[-2:])


def first_flip(source: str | ShardMember, seed: int) -> bool:
    """Whether ``source`` is mirrored in epoch 0: a fair coin of the seed and its :func:`file_name`.

    The same in every process, backend and run of that seed, and wherever the dataset lies.

    >>> [first_flip(f"cat/{i}.jpg", seed=0) for i in range(6)]
    [False, False, True, True, False, False]
    """
    check_int("seed", seed, low=0)
    digest = hashlib.blake2b(f"{seed}/{file_name(source)}".encode(errors="surrogateescape"), digest_size=1).digest()
    return bool(digest[0] & 1)


def alternating_flip(source: str | ShardMember, seed: int, epoch: int) -> bool:
    """Whether ``source`` is mirrored in ``epoch``: its first flip in even epochs, the other way in odd ones.

    >>> [alternating_flip("cat/1.jpg", seed=0, epoch=e) for e in range(4)]
    [False, True, False, True]
    """
    check_int("epoch", epoch, low=0)
    return first_flip(source, seed) != bool(epoch % 2)
