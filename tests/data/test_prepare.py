"""``python -m fastcore_ops.data.prepare``: WebDataset shards, shrunk once, resumable, read back by build_loader."""

from __future__ import annotations

import io
import json
import tarfile
import warnings

import pytest
import torch
import webdataset
from PIL import Image

from fastcore_ops.data import SkippedImagesWarning, build_loader
from fastcore_ops.data import prepare as prepare_module
from fastcore_ops.data.dali_backend import dali_available
from fastcore_ops.data.prepare import PrepareSettings, main, prepare_shards
from fastcore_ops.data.shards import ShardMember, read_encoded, read_shard_samples

SMALL = PrepareSettings(max_side=64, quality=90, shard_size=3, seed=0)


@pytest.fixture
def source(make_tree, photo_jpegs, real_jpegs, bad_files):
    """Two classes: full-size photos and 32 px CIFAR JPEGs, a PNG and two files that cannot be decoded."""
    bad = bad_files()
    photos = {f"photo{i}.jpg": path.read_bytes() for i, path in enumerate(photo_jpegs(3))}
    small = {f"small{i}.jpg": path.read_bytes() for i, path in enumerate(real_jpegs(3))}
    return make_tree({
        "a": {**photos, "truncated.jpg": bad["truncated.jpg"][0]},
        "b": {**small, "picture.png": bad["picture.png"][0], "notes.jpg": bad["notes.jpg"][0]},
    })


def _members(shard):
    with tarfile.open(shard) as tar:
        return {member.name: tar.extractfile(member).read() for member in tar.getmembers()}


def test_every_decodable_image_is_shrunk_to_the_max_side_never_enlarged_and_indexed(source, tmp_path):
    index_path = prepare_shards(source, tmp_path / "out", SMALL, workers=1, progress=False)
    index = json.loads(index_path.read_text())
    assert index["classes"] == ["a", "b"] and index["class_counts"] == [3, 4] and index["samples"] == 7
    assert sorted(entry["source"].rsplit("/", 1)[1] for entry in index["skipped"]) == ["notes.jpg", "truncated.jpg"]
    assert all(entry["reason"] for entry in index["skipped"])
    assert all(len(shard["members"]) <= 3 for shard in index["shards"])
    originals = {path.read_bytes() for path in (source / "b").glob("small*.jpg")}
    for shard in index["shards"]:
        tar_members = _members(tmp_path / "out" / shard["file"])
        for key, offset, size, label in shard["members"]:
            jpeg = tar_members[f"{key}.jpg"]
            assert read_encoded(ShardMember(str(tmp_path / "out" / shard["file"]), offset, size, key)) == jpeg
            assert tar_members[f"{key}.cls"] == str(label).encode()
            width, height = Image.open(io.BytesIO(jpeg)).size
            if label == 0:  # the photos: longer side shrunk to exactly 64
                assert max(width, height) == 64
            else:  # CIFAR's 32 px JPEGs keep their own bytes; the 32 px PNG becomes a 32 px JPEG
                assert (width, height) == (32, 32) and Image.open(io.BytesIO(jpeg)).format == "JPEG"
        assert (tmp_path / "out" / shard["file"]).stat().st_size == shard["bytes"]
    kept = {data for shard in index["shards"] for name, data in _members(tmp_path / "out" / shard["file"]).items()}
    assert originals <= kept
    assert not list((tmp_path / "out").glob("*.partial")) and not (tmp_path / "out" / "prepare-progress.jsonl").exists()


def test_the_webdataset_package_reads_the_shards_as_they_are(source, tmp_path):
    prepare_shards(source, tmp_path / "out", SMALL, workers=1, progress=False)
    shards = sorted(str(path) for path in (tmp_path / "out").glob("shard-*.tar"))
    samples = list(webdataset.WebDataset(shards, shardshuffle=False).decode("pil").to_tuple("jpg", "cls"))
    expected, _ = read_shard_samples(tmp_path / "out")
    assert [label for _, label in samples] == [label for _, label in expected]
    assert all(max(image.size) <= 64 for image, _ in samples)


def test_a_stopped_preparation_resumes_where_it_stopped_and_ends_as_an_unstopped_one(source, tmp_path, monkeypatch):
    write_shard = prepare_module._write_shard
    calls = []

    def killed_in_the_second_shard(path, members):
        calls.append(path.name)
        if len(calls) == 2:
            path.with_name(path.name + ".partial").write_bytes(b"half a shard")
            raise KeyboardInterrupt
        return write_shard(path, members)

    monkeypatch.setattr(prepare_module, "_write_shard", killed_in_the_second_shard)
    with pytest.raises(KeyboardInterrupt):
        prepare_shards(source, tmp_path / "out", SMALL, workers=1, progress=False)
    out = tmp_path / "out"
    assert not (out / "index.json").exists() and not (out / "shard-000001.tar").exists()
    first = (out / "shard-000000.tar").stat()
    monkeypatch.setattr(prepare_module, "_write_shard", write_shard)
    prepare_shards(source, out, SMALL, workers=1, progress=False)
    assert (out / "shard-000000.tar").stat().st_mtime_ns == first.st_mtime_ns  # kept, not written again
    prepare_shards(source, tmp_path / "straight", SMALL, workers=2, progress=False)
    resumed, straight = (json.loads((folder / "index.json").read_text()) for folder in (out, tmp_path / "straight"))
    assert resumed == straight
    assert not list(out.glob("*.partial"))


def test_other_settings_are_refused_for_a_folder_prepared_or_being_prepared_with_others(source, tmp_path, monkeypatch):
    prepare_shards(source, tmp_path / "done", SMALL, workers=1, progress=False)
    with pytest.raises(ValueError, match="already holds a dataset prepared with"):
        prepare_shards(source, tmp_path / "done", PrepareSettings(max_side=32, shard_size=3), workers=1, progress=False)

    def killed(path, members):
        raise KeyboardInterrupt

    monkeypatch.setattr(prepare_module, "_write_shard", killed)
    with pytest.raises(KeyboardInterrupt):
        prepare_shards(source, tmp_path / "half", SMALL, workers=1, progress=False)
    with pytest.raises(ValueError, match="unfinished preparation with other settings"):
        prepare_shards(source, tmp_path / "half", PrepareSettings(max_side=32, shard_size=3), workers=1, progress=False)


@pytest.mark.parametrize("backend", ["pil", pytest.param("dali", marks=pytest.mark.skipif(
    dali_available() is not None, reason=f"DALI unusable here: {dali_available()}"))])
def test_build_loader_reads_shards_exactly_as_the_same_images_from_files(source, tmp_path, backend):
    prepare_shards(source, tmp_path / "out", SMALL, workers=1, progress=False)
    samples, classes = read_shard_samples(tmp_path / "out")
    assert classes == ["a", "b"]
    files = []
    for number, (member, label) in enumerate(samples):
        path = tmp_path / "files" / f"{number}.jpg"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(read_encoded(member))
        files.append((path, label))
    options = dict(batch_size=3, train=True, image_size=24, backend=backend, seed=3, num_workers=1)
    from_shards = build_loader(tmp_path / "out", **options)
    from_files = build_loader(files, **options)
    for loader in (from_shards, from_files):
        loader.set_epoch(1)
    for (images, labels), (file_images, file_labels) in zip(from_shards, from_files, strict=True):
        assert torch.equal(images, file_images) and torch.equal(labels, file_labels)
    assert len(from_shards) == 2  # 7 images, batch 3, the last short batch dropped in training
    from_shards.close()
    from_files.close()


def test_a_cut_shard_is_refused_and_a_damaged_image_in_one_is_skipped_by_name(source, tmp_path):
    prepare_shards(source, tmp_path / "out", SMALL, workers=1, progress=False)
    (member, _), *_ = read_shard_samples(tmp_path / "out")[0]
    with open(member.shard, "r+b") as shard:  # same size, the image's bytes overwritten
        shard.seek(member.offset)
        shard.write(b"\x00" * member.size)
    loader = build_loader(tmp_path / "out", batch_size=7, train=False, image_size=24, backend="pil", num_workers=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (images, labels), = list(loader)
    assert len(labels) == 6
    assert any(f"shard-000000.tar#{member.key}.jpg" in str(w.message) for w in caught
               if issubclass(w.category, SkippedImagesWarning))
    with open(member.shard, "r+b") as shard:
        shard.truncate(member.offset)
    with pytest.raises(ValueError, match="was cut or changed"):
        build_loader(tmp_path / "out", batch_size=2, train=True, image_size=24, backend="pil", num_workers=0)


def test_the_command_line_prepares_and_names_bad_settings(source, tmp_path, capsys):
    assert main([str(source), str(tmp_path / "out"), "--max-side", "64", "--shard-size", "4", "--workers", "1",
                 "--no-progress"]) == 0
    assert "7 images in 3 shards, 2 unreadable files left out" in capsys.readouterr().out
    assert main([str(source), str(tmp_path / "bad"), "--quality", "0", "--no-progress"]) == 2
    assert "quality" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()
