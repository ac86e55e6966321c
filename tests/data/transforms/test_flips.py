from pathlib import PurePath

import pytest

from fastcore_ops.data.shards import ShardMember
from fastcore_ops.data.transforms.flips import alternating_flip, file_name, first_flip

# Paths PurePath normalizes (doubled and trailing slashes, "." parts), and plain ones, absolute and relative.
PATHS = ["/data/cifar10/train/cat/0001.jpg", "train/cat/0001.jpg", "cat/0001.jpg", "0001.jpg", "/0001.jpg",
         "cat//0001.jpg", "cat/./0001.jpg", "cat/0001.jpg/", "./0001.jpg", "../cat/0001.jpg", "cat/..",
         "a b/ünï cödé.jpg", "//net/share/dog/7.png", "cat/0001.jpg/.", ""]


@pytest.mark.parametrize("path", PATHS)
def test_a_file_is_named_by_the_last_two_parts_purepath_finds(path):
    assert file_name(path) == "/".join(PurePath(path).parts[-2:])


def test_a_shard_member_is_named_by_its_key_and_each_image_flips_every_other_epoch():
    member = ShardMember(shard="shard-000000.tar", offset=0, size=1, key="cat/0001.jpg")
    assert file_name(member) == "cat/0001.jpg"
    assert first_flip(member, seed=4) == first_flip("/elsewhere/cat/0001.jpg", seed=4)
    flips = [alternating_flip("/x/cat/0001.jpg", seed=4, epoch=epoch) for epoch in range(4)]
    assert flips == [first_flip("cat/0001.jpg", seed=4), not flips[0]] * 2
