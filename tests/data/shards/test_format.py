"""A prepared folder is data from elsewhere: its index is checked when it is opened, its shards before they are read."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from fastcore_ops.data import build_loader
from fastcore_ops.data.prepare import PrepareSettings
from fastcore_ops.data.shard_writer import prepare_shards
from fastcore_ops.data.shards import ShardChecksumError, read_encoded, read_index, read_shard_samples, verify_shards
from fastcore_ops.data.shards import format as shards_module
from tests.data.conftest import coded_image, jpeg_bytes

CLASSES = 3


@pytest.fixture(scope="module")
def prepared_once(tmp_path_factory) -> Path:
    """Three classes of four 16 px images, prepared as three shards of four (each 20 KiB: two tar records)."""
    root = tmp_path_factory.mktemp("source")
    for label in range(CLASSES):
        (root / f"class{label}").mkdir()
        for number in range(4):
            image = coded_image(label, 16, label * 10 + number)
            (root / f"class{label}" / f"{number}.jpg").write_bytes(jpeg_bytes(image))
    out = tmp_path_factory.mktemp("prepared") / "out"
    prepare_shards(root, out, PrepareSettings(max_side=16, shard_size=4), workers=1, progress=False)
    return out


@pytest.fixture
def prepared(prepared_once, tmp_path) -> Path:
    """A fresh copy of the prepared folder, for a test to damage."""
    return Path(shutil.copytree(prepared_once, tmp_path / "prepared"))


def _edit_index(folder: Path, change) -> Path:
    """Apply ``change`` to the folder's index (a dict) and write it back; returns the index path."""
    path = folder / "index.json"
    index = json.loads(path.read_text())
    change(index)
    path.write_text(json.dumps(index))
    return path


def _refused_at_open(folder: Path, field: str, problem: str, error: type[Exception] = ValueError) -> None:
    """Opening the folder raises ``error`` naming index.json, the field and the problem."""
    with pytest.raises(error, match=re.escape(f"{folder / 'index.json'}: {field} {problem}")):
        read_shard_samples(folder)


def _outside_copy_of_shard_0(folder: Path) -> str:
    """``../outside.tar``: shard 0's very bytes (same size, same sha256) beside the folder, not in it."""
    shutil.copy(folder / "shard-000000.tar", folder.parent / "outside.tar")
    return "../outside.tar"


def _link_to_outside(folder: Path) -> str:
    (folder / "linked.tar").symlink_to(folder.parent / _outside_copy_of_shard_0(folder).removeprefix("../"))
    return "linked.tar"


def _link_inside(folder: Path) -> str:
    (folder / "linked.tar").symlink_to("shard-000000.tar")
    return "linked.tar"


def _in_a_subfolder(folder: Path) -> str:
    (folder / "sub").mkdir()
    shutil.copy(folder / "shard-000000.tar", folder / "sub" / "shard.tar")
    return "sub/shard.tar"


def _a_folder(folder: Path) -> str:
    (folder / "folder.tar").mkdir()
    return "folder.tar"


def _a_fifo(folder: Path) -> str:
    os.mkfifo(folder / "pipe.tar")
    return "pipe.tar"


# Each: makes what shards[0].file then names, and what the refusal says about it.
OUTSIDE = {
    "an absolute path": (lambda folder: "/etc/passwd", "is '/etc/passwd'; only a plain file name is accepted"),
    "a parent path": (_outside_copy_of_shard_0, "is '../outside.tar'; only a plain file name is accepted"),
    "a path into a sub-folder": (_in_a_subfolder, "is 'sub/shard.tar'; only a plain file name is accepted"),
    "the folder itself": (lambda folder: ".", "is '.'; only a plain file name"),
    "an empty name": (lambda folder: "", "is ''; only a plain file name"),
    "a link leading outside": (_link_to_outside, "names 'linked.tar', a symbolic link; only plain files inside"),
    "a link inside the folder": (_link_inside, "names 'linked.tar', a symbolic link"),
    "a folder": (_a_folder, "names 'folder.tar', which is not a regular file"),
    "a named pipe": (_a_fifo, "names 'pipe.tar', which is not a regular file"),
    "not a string": (lambda folder: ["shard-000000.tar"], "must be a string, got list"),
}


@pytest.mark.parametrize("case", OUTSIDE)
def test_a_shard_named_outside_the_folder_or_not_as_a_plain_file_is_refused_before_anything_is_read(prepared, case):
    make, problem = OUTSIDE[case]
    name = make(prepared)
    _edit_index(prepared, lambda index: index["shards"][0].update(file=name))
    opened = []
    real_open = open

    def recorded_open(path, *args, **kwargs):  # how shards are read (the index is read through pathlib)
        opened.append(path)
        return real_open(path, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("builtins.open", recorded_open)
        _refused_at_open(prepared, "shards[0].file", problem)
        with pytest.raises(ValueError, match=re.escape(problem)):
            build_loader(prepared, batch_size=2, train=True, image_size=16, backend="pil", num_workers=0)
    assert opened == []


# Each: a change to a good index, the field the refusal names and what it says (ValueError when the folder is opened).
BAD_INDEX = {
    "a missing key": (lambda index: index.pop("class_counts"), "", "lacks 'class_counts'"),
    "a bool for an int": (lambda index: index.update(samples=True), "samples", "must be an int, got bool True"),
    "a string for an int": (lambda index: index.update(samples="12"), "samples", "must be an int, got str '12'"),
    "shards not a list": (lambda index: index.update(shards={}), "shards", "must be a list, got dict {}"),
    "a shard not an object": (lambda index: index["shards"].append([]), "shards[3]", "must be an object, got list []"),
    "a shard without members": (lambda index: index["shards"][1].pop("members"), "shards[1]", "lacks 'members'"),
    "a checksum not hex": (lambda index: index["shards"][0].update(sha256="0" * 63 + "g"), "shards[0].sha256",
                           "must be 64 lowercase hex digits"),
    "negative bytes": (lambda index: index["shards"][0].update(bytes=-1), "shards[0].bytes", "must be >= 0, got -1"),
    "a negative label": (lambda index: index["shards"][0]["members"][0].__setitem__(3, -1), "shards[0].members[0]",
                         "has label -1; there are 3 classes, labels 0 to 2"),
    "a label past the classes": (lambda index: index["shards"][2]["members"][3].__setitem__(3, 3),
                                 "shards[2].members[3]", "has label 3; there are 3 classes"),
    "a float label": (lambda index: index["shards"][0]["members"][1].__setitem__(3, 1.0), "shards[0].members[1]",
                      "has label float 1.0, not an int"),
    "a bool label": (lambda index: index["shards"][0]["members"][1].__setitem__(3, True), "shards[0].members[1]",
                     "has label bool True, not an int"),
    "a class dropped from the list": (lambda index: index["classes"].pop(), "shards[", "; there are 2 classes"),
    "a class listed twice": (lambda index: index["classes"].__setitem__(2, "class0"), "classes",
                             "must list one or more class names, each once"),
    "a class name not a string": (lambda index: index["classes"].__setitem__(1, 1), "classes[1]",
                                  "must be a string, got int 1"),
    "no classes": (lambda index: index.update(classes=[]), "classes", "must list one or more class names"),
    "class counts that do not add up": (lambda index: index["class_counts"].__setitem__(0, 5), "class_counts",
                                        "is [5, 4, 4], but the shards list [4, 4, 4] images per class"),
    "a samples count that does not add up": (lambda index: index.update(samples=13), "samples",
                                             "is 13, but the shards list 12 images"),
    "a member listed twice": (lambda index: index["shards"][0]["members"].append(index["shards"][0]["members"][0]),
                              "shards[0].members[4]", "lists key"),
    "a key listed in two shards": (lambda index: index["shards"][1]["members"][0].__setitem__(
        0, index["shards"][0]["members"][0][0]), "shards[1].members[0]", "a second time"),
    "overlapping members": (lambda index: _overlap(index["shards"][1]["members"]), "shards[1].members[",
                            "inside shards[1].members["),
    "a size past the shard's end": (lambda index: index["shards"][0]["members"][2].__setitem__(2, 10**12),
                                    "shards[0].members[2]", "which do not lie inside the shard's 20480 bytes"),
    "an offset inside a tar block": (lambda index: index["shards"][0]["members"][2].__setitem__(
        1, index["shards"][0]["members"][2][1] + 1), "shards[0].members[2]", "not at the start of a 512-byte tar"),
    "a negative offset": (lambda index: index["shards"][0]["members"][2].__setitem__(1, -512), "shards[0].members[2]",
                          "has offset -512"),
    "an empty member": (lambda index: index["shards"][0]["members"][2].__setitem__(2, 0), "shards[0].members[2]",
                        "and size 0, which do not lie inside"),
    "a member with three fields": (lambda index: index["shards"][0]["members"][2].pop(), "shards[0].members[2]",
                                   "must be a [key, offset, size, label] list, got list"),
    "a key that is a path": (lambda index: index["shards"][0]["members"][2].__setitem__(0, "../000000001"),
                             "shards[0].members[2]", "has key str '../000000001'"),
    "a shard named twice": (lambda index: index["shards"][1].update(file="shard-000000.tar"), "shards[1].file",
                            "names 'shard-000000.tar' a second time"),
    "settings not an object": (lambda index: index.update(settings=None), "settings",
                               "must be an object, got NoneType"),
    "a skipped file without its reason": (lambda index: index["skipped"].append({"source": "x.jpg"}), "skipped[0]",
                                          "lacks 'reason'"),
}


def _overlap(members: list[list]) -> None:
    members[1][1] = members[0][1]


@pytest.mark.parametrize("case", BAD_INDEX)
def test_every_malformed_index_field_is_a_value_error_naming_the_file_and_the_field(prepared, case):
    change, field, problem = BAD_INDEX[case]
    path = _edit_index(prepared, change)
    named = re.escape(f"{path}: {field}" if field else f"{path} ")
    with pytest.raises(ValueError, match=named + ".*" + re.escape(problem)):
        read_index(prepared)


# Each: what index.json holds instead of the index, and what the refusal says.
CORRUPT = {
    "empty": (b"", "is not valid JSON (Expecting value"),
    "cut": (b'{"format": "fastcore_ops.shards", "vers', "is not valid JSON (Unterminated string"),
    "not UTF-8": (b'{"format": "\xff\xfe"}', "is not UTF-8 text"),
    "a list": (b"[]", "is not an index of fastcore_ops shards"),
    "another program's index": (b'{"name": "my-site"}', "is not an index of fastcore_ops shards"),
    "another version": (b'{"format": "fastcore_ops.shards", "version": 2}', "has index version 2"),
    "nested past the recursion limit": (b"[" * 100_000 + b"]" * 100_000, "is not valid JSON (maximum recursion depth"),
    "NaN": (b'{"format": "fastcore_ops.shards", "version": NaN}', "is not valid JSON (NaN is not a JSON number)"),
    "a key twice": (b'{"format": "fastcore_ops.shards", "format": "x"}', "key 'format' appears twice in one object"),
    "an integer of 5000 digits": (b'{"samples": ' + b"9" * 5000 + b"}", "is not valid JSON (Exceeds the limit"),
}


@pytest.mark.parametrize("case", CORRUPT)
def test_a_corrupt_index_file_is_a_value_error_naming_it(prepared, case):
    data, problem = CORRUPT[case]
    (prepared / "index.json").write_bytes(data)
    with pytest.raises(ValueError, match=re.escape(f"{prepared / 'index.json'} ") + ".*" + re.escape(problem)):
        read_shard_samples(prepared)


def test_an_index_too_large_to_be_one_is_refused_before_it_is_read(prepared, monkeypatch):
    monkeypatch.setattr(shards_module, "MAX_JSON_BYTES", 100)
    with pytest.raises(ValueError, match=r"index.json holds \d+ bytes, more than the 100 that prepare writes"):
        read_shard_samples(prepared)


def test_a_missing_shard_is_a_file_not_found_error_naming_it_and_the_index(prepared):
    (prepared / "shard-000001.tar").unlink()
    with pytest.raises(FileNotFoundError, match=re.escape(f"'{prepared / 'shard-000001.tar'}', listed in "
                                                          f"{prepared / 'index.json'}, is missing")):
        read_shard_samples(prepared)


def _swap_shards(folder: Path) -> None:
    first, second = folder / "shard-000000.tar", folder / "shard-000001.tar"
    assert first.stat().st_size == second.stat().st_size  # so the size check at opening cannot see it
    data = first.read_bytes()
    first.write_bytes(second.read_bytes())
    second.write_bytes(data)


def test_two_shards_of_equal_size_swapped_stop_the_first_epoch_before_any_image_is_read(prepared):
    _swap_shards(prepared)
    loader = build_loader(prepared, batch_size=4, train=True, image_size=16, backend="pil", num_workers=2)
    with pytest.raises(ShardChecksumError) as caught:
        next(iter(loader))
    loader.close()
    message = str(caught.value)
    assert message.startswith(f"2 shard(s) differ from the sha256 {prepared / 'index.json'} gives them: "
                              f"'{prepared / 'shard-000000.tar'}', '{prepared / 'shard-000001.tar'}'; ")
    assert message.endswith("copy the prepared folder again, or prepare the dataset again")
    assert "\n" not in message and "DataLoader worker" not in message  # raised here, before the workers read


def test_each_shard_is_hashed_once_per_process_before_its_first_read(prepared, monkeypatch):
    hashed = []
    monkeypatch.setattr(shards_module, "sha256_of", lambda path: hashed.append(Path(path).name) or
                        shards_module.hashlib.sha256(Path(path).read_bytes()).hexdigest())
    samples, _ = read_shard_samples(prepared)
    read_encoded(samples[0][0])
    read_encoded(samples[1][0])
    assert hashed == ["shard-000000.tar"]
    loader = build_loader(prepared, batch_size=4, train=True, image_size=16, backend="pil", num_workers=1)
    for epoch in range(2):
        loader.set_epoch(epoch)
        assert len(list(loader)) == 3
    loader.close()
    assert sorted(hashed) == ["shard-000000.tar", "shard-000001.tar", "shard-000002.tar"]
    assert verify_shards(samples) == 0


def test_a_shard_changed_after_opening_is_caught_at_its_first_read(prepared):
    samples, _ = read_shard_samples(prepared)
    _swap_shards(prepared)
    with pytest.raises(ShardChecksumError, match="shard-000000.tar'; they were changed or damaged after preparing"):
        read_encoded(samples[0][0])
