"""``python -m fastcore_ops.data.prepare``: WebDataset shards, shrunk once, resumable, read back by build_loader."""

from __future__ import annotations

import errno
import io
import json
import os
import re
import tarfile
from pathlib import Path

import pytest
import torch
import webdataset
from PIL import Image

from fastcore_ops.data import build_loader, shard_writer
from fastcore_ops.data.backends.dali import dali_available
from fastcore_ops.data.prepare import PrepareSettings, main
from fastcore_ops.data.shard_writer import prepare_shards
from fastcore_ops.data.shards import ShardChecksumError, ShardMember, read_encoded, read_shard_samples
from fastcore_ops.data.sources import DatasetScanWarning
from fastcore_ops.owned_folder import owns

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


def _stopped_in_the_second_shard(source, folder, monkeypatch):
    """Prepare ``source`` into ``folder`` and stop it (KeyboardInterrupt) as it writes shard 1, half written."""
    write_shard = shard_writer._write_shard

    def stopped(path, members):
        if path.name == "shard-000001.tar":
            path.with_name(path.name + ".partial").write_bytes(b"half a shard")
            raise KeyboardInterrupt
        return write_shard(path, members)

    with monkeypatch.context() as patch:
        patch.setattr(shard_writer, "_write_shard", stopped)
        with pytest.raises(KeyboardInterrupt):
            prepare_shards(source, folder, SMALL, workers=1, progress=False)


def test_a_stopped_preparation_resumes_where_it_stopped_and_ends_as_an_unstopped_one(source, tmp_path, monkeypatch):
    out = tmp_path / "out"
    _stopped_in_the_second_shard(source, out, monkeypatch)
    assert not (out / "index.json").exists() and not (out / "shard-000001.tar").exists()
    first = (out / "shard-000000.tar").stat()
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
    _stopped_in_the_second_shard(source, tmp_path / "half", monkeypatch)
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


def test_a_cut_shard_is_refused_when_opened_and_a_changed_one_before_its_first_image_is_read(source, tmp_path):
    prepare_shards(source, tmp_path / "out", SMALL, workers=1, progress=False)
    (member, _), *_ = read_shard_samples(tmp_path / "out")[0]
    with open(member.shard, "r+b") as shard:  # same size, the image's bytes overwritten
        shard.seek(member.offset)
        shard.write(b"\x00" * member.size)
    loader = build_loader(tmp_path / "out", batch_size=7, train=False, image_size=24, backend="pil", num_workers=1)
    with pytest.raises(ShardChecksumError, match=r"1 shard\(s\) differ from the sha256 .*index.json gives them: "
                                                 r".*shard-000000.tar'; .*copy the prepared folder again"):
        list(loader)
    loader.close()
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


def _snapshot(path: Path) -> dict | bytes | None:
    """Every name under a folder, hidden ones too, with its bytes or link target; a file's bytes; None if absent."""
    if not os.path.lexists(path):
        return None
    if path.is_file():
        return path.read_bytes()
    found = {}
    for parent, folders, files in os.walk(path):
        for name in folders + files:
            inside = Path(parent, name)
            found[str(inside.relative_to(path))] = (f"-> {os.readlink(inside)}" if inside.is_symlink() else
                                                    "folder" if inside.is_dir() else inside.read_bytes())
    return found


def _refused(argv: list[str], capsys) -> str:
    """Run the command line, check it refused (exit 2, one ``error:`` line, no traceback); returns that line."""
    code = main([*argv, "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("error: ") and "Traceback" not in err, err
    return err.strip()


def _with_file(folder: Path, name: str, data: bytes) -> Path:
    """``folder``, made if needed, with ``name`` holding ``data`` in it."""
    folder.mkdir(exist_ok=True)
    (folder / name).write_bytes(data)
    return folder


def _strangers(folder: Path) -> Path:
    return _with_file(_with_file(folder, "notes.txt", b"mine"), "ubuntu.iso.partial", b"half an iso")


# Each: (the command line's arguments, made under tmp_path beside the source tree; what its error says).
BAD_COMMANDS = {
    "workers 0": (lambda src, tmp: [src, tmp / "out", "--workers", "0"], "workers must be an int >= 1, got 0"),
    "max side 3": (lambda src, tmp: [src, tmp / "out", "--max-side", "3"], "max_side must be an int >= 8, got 3"),
    "workers not a number": (lambda src, tmp: [src, tmp / "out", "--workers", "many"], "invalid int value: 'many'"),
    "no destination": (lambda src, tmp: [src], "the following arguments are required: destination"),
    "missing source": (lambda src, tmp: [tmp / "nowhere", tmp / "out"], "does not exist"),
    "source already prepared": (lambda src, tmp: [_with_file(tmp / "prepared", "index.json", b"{}"), tmp / "out"],
                                "is already a prepared folder (it has index.json)"),
    "destination inside the source": (lambda src, tmp: [src, src / "shards"], "or inside it"),
    "destination is the source": (lambda src, tmp: [src, src], "or inside it"),
    "destination is a file": (lambda src, tmp: [src, _with_file(tmp, "out", b"a file") / "out"],
                              "is a file, not a folder"),
    "stranger's files": (lambda src, tmp: [src, _strangers(tmp / "out")],
                         "holds files that python -m fastcore_ops.data.prepare did not write"),
    "corrupt index in the destination": (lambda src, tmp: [src, _with_file(tmp / "out", "index.json", b"{")],
                                         "index.json is not valid JSON"),
}


@pytest.mark.parametrize("case", BAD_COMMANDS)
def test_a_refused_command_is_one_error_line_and_exit_2_and_changes_nothing(source, tmp_path, capsys, case):
    arguments, message = BAD_COMMANDS[case]
    argv = [str(argument) for argument in arguments(source, tmp_path)]
    before = {path: _snapshot(path) for path in (source, tmp_path / "out")}
    assert message in _refused(argv, capsys)
    assert {path: _snapshot(path) for path in before} == before


def _lines(progress: Path, change) -> None:
    """Rewrite the progress file with ``change(lines)``."""
    progress.write_text(change(progress.read_text().splitlines(keepends=True)))


# Each: a change to the progress file of a stopped run (one shard finished), and what the refusal says.
BAD_PROGRESS = {
    "empty": (lambda lines: "", "prepare-progress.jsonl holds no complete line"),
    "a line that is not JSON": (lambda lines: lines[0] + "{'file': 'shard-000000.tar'}\n",
                                "prepare-progress.jsonl: line 2 is not valid JSON"),
    "settings that are not an object": (lambda lines: "[64, 90]\n" + lines[1], "line 1 must be an object, got list"),
    "a shard named by a path": (lambda lines: lines[0] + lines[1].replace('"shard-000000.tar"', '"../x.tar"'),
                                "line 2.file must be 'shard-000000.tar' (shard 0), got '../x.tar'"),
    "a label out of range": (lambda lines: lines[0] + re.sub(r", (\d)\]", ", 7]", lines[1], count=1),
                             "line 2.members[0] has label 7; there are 2 classes"),
}


@pytest.mark.parametrize("case", BAD_PROGRESS)
def test_a_damaged_progress_file_is_refused_naming_it_and_the_fix(source, tmp_path, monkeypatch, capsys, case):
    change, message = BAD_PROGRESS[case]
    out = tmp_path / "out"
    _stopped_in_the_second_shard(source, out, monkeypatch)
    _lines(out / "prepare-progress.jsonl", change)
    before = _snapshot(out)
    line = _refused([str(source), str(out), "--max-side", "64", "--shard-size", "3", "--workers", "1"], capsys)
    assert message in line and line.endswith("; delete it to start this preparation over")
    assert _snapshot(out) == before


def test_a_run_stopped_with_its_settings_changed_is_refused_naming_them(source, tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    _stopped_in_the_second_shard(source, out, monkeypatch)
    before = _snapshot(out)
    line = _refused([str(source), str(out), "--max-side", "32", "--shard-size", "3", "--workers", "1"], capsys)
    assert "unfinished preparation with other settings; rerun with its settings (settings={'max_side': 64" in line
    assert _snapshot(out) == before


def test_a_progress_line_cut_by_a_stop_is_dropped_and_its_shard_written_again(source, tmp_path, monkeypatch):
    out = tmp_path / "out"
    _stopped_in_the_second_shard(source, out, monkeypatch)
    _lines(out / "prepare-progress.jsonl", lambda lines: lines[0] + lines[1][: len(lines[1]) // 2])
    first = (out / "shard-000000.tar").stat()
    prepare_shards(source, out, SMALL, workers=1, progress=False)
    assert (out / "shard-000000.tar").stat().st_mtime_ns != first.st_mtime_ns  # written again
    prepare_shards(source, tmp_path / "straight", SMALL, workers=1, progress=False)
    assert (out / "index.json").read_text() == (tmp_path / "straight" / "index.json").read_text()


@pytest.mark.parametrize("existed", [False, True], ids=["absent", "empty"])
def test_a_start_that_fails_before_its_first_shard_leaves_the_destination_as_it_was(source, tmp_path, monkeypatch,
                                                                                    capsys, existed):
    out = tmp_path / "out"
    if existed:
        out.mkdir()

    def disk_full(path, members):
        path.with_name(path.name + ".partial").write_bytes(b"the start of a shard")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(shard_writer, "_write_shard", disk_full)
    assert "No space left on device" in _refused([str(source), str(out), "--workers", "1"], capsys)
    assert _snapshot(out) == ({} if existed else None)


def test_prepare_replaces_and_deletes_only_the_files_it_wrote(source, tmp_path, monkeypatch):
    out = tmp_path / "out"
    _stopped_in_the_second_shard(source, out, monkeypatch)
    assert (out / "shard-000001.tar.partial").exists() and owns(out, "prepare")
    theirs = {"ubuntu.iso.partial": b"half an iso", "shard-1.tar.partial": b"not prepare's name", "notes.txt": b"mine"}
    for name, data in theirs.items():
        (out / name).write_bytes(data)
    prepare_shards(source, out, SMALL, workers=1, progress=False)
    assert {name: (out / name).read_bytes() for name in theirs} == theirs
    assert not list(out.glob("shard-00000?.tar.partial")) and not (out / "prepare-progress.jsonl").exists()
    assert read_shard_samples(out)[1] == ["a", "b"]


@pytest.mark.timeout(60)  # a named pipe that is opened waits for a writer forever: fail, do not hang
def test_a_named_pipe_in_the_source_is_left_out_and_named_never_opened(source, tmp_path, capsys):
    os.mkfifo(source / "a" / "pipe.jpg")
    with pytest.warns(DatasetScanWarning, match="a/pipe.jpg': it is a named pipe, not a regular file"):
        assert main([str(source), str(tmp_path / "out"), "--max-side", "64", "--workers", "1", "--no-progress"]) == 0
    assert "7 images in 1 shards, 2 unreadable files left out" in capsys.readouterr().out


def _disk_full_in_shard(number: int, monkeypatch) -> None:
    """Make the real shard writer run out of space in shard ``number``, after its first image is written."""
    add_member = shard_writer._add_member

    def add(tar, name, data):
        start = add_member(tar, name, data)
        if tar.fileobj.name.endswith(f"shard-{number:06d}.tar.partial"):
            tar.fileobj.flush()
            raise OSError(errno.ENOSPC, "No space left on device")
        return start

    monkeypatch.setattr(shard_writer, "_add_member", add)


@pytest.mark.parametrize("full_in", [0, 1], ids=["first-shard", "second-shard"])
def test_a_full_disk_names_the_file_what_was_left_and_the_fix(source, tmp_path, monkeypatch, capsys, full_in):
    out = tmp_path / "new" / "out"
    _disk_full_in_shard(full_in, monkeypatch)
    line = _refused([str(source), str(out), "--max-side", "64", "--shard-size", "3", "--workers", "1"], capsys)
    assert line.startswith(f"error: the disk is full (No space left on device) while writing {out}/shard-"
                           f"00000{full_in}.tar.partial; prepare ")
    assert line.endswith("Free space on that disk (df -h shows how much is left), or pass a destination folder on "
                         "another disk")
    if full_in == 0:  # nothing worth keeping: the new folder is gone again
        assert f"deleted what it wrote, and {out}, which it had created" in line
        assert _snapshot(out) is None
    else:  # the finished shard is kept to continue from; the one cut short is deleted, giving its space back
        assert f"kept the 1 finished shard(s) and prepare-progress.jsonl in {out} and deleted the file cut short" in line
        assert sorted(_snapshot(out)) == [".fastcore_ops-prepare", "prepare-progress.jsonl", "shard-000000.tar"]
        monkeypatch.undo()
        prepare_shards(source, out, SMALL, workers=1, progress=False)  # once there is space, the same command ends it
        assert read_shard_samples(out)[1] == ["a", "b"]
