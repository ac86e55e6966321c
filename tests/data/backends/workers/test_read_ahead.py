"""Reading the next runs' files on threads while the process that decodes them trains."""

import threading
from pathlib import Path

import torch

from fastcore_ops.data.backends.pil import PilBackend
from fastcore_ops.data.backends.workers.read_ahead import ReadAhead
from tests.hang_guard import HANG_GUARD_S


class _Disk:
    """A read that records which files were read on which thread, and raises for files named ``missing``."""

    def __init__(self):
        self.read_on: dict[str, str] = {}
        self.changed = threading.Condition()

    def read(self, path: str) -> bytes:
        with self.changed:
            self.read_on[path] = threading.current_thread().name
            self.changed.notify_all()
        if path.startswith("missing"):
            raise FileNotFoundError(path)
        return path.encode()

    def wait_for(self, path: str) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: path in self.read_on, timeout=HANG_GUARD_S), f"{path} never read"


def test_the_next_runs_are_read_on_other_threads_before_they_are_taken_and_no_further_than_depth():
    disk = _Disk()
    ahead = ReadAhead(disk.read, wanted=lambda path: True, depth=2)
    ahead.begin([(0, ["a", "b"]), (2, ["c", "d"]), (4, ["e"])])
    disk.wait_for("d")  # the second run is read before anything is taken
    assert "e" not in disk.read_on, "a third run waits until the first is taken"
    assert ahead.take(0) == {"a": b"a", "b": b"b"}
    disk.wait_for("e")
    assert ahead.take(2) == {"c": b"c", "d": b"d"} and ahead.take(4) == {"e": b"e"}
    assert set(disk.read_on.values()) == {"read-ahead"}, "every file was read off the calling thread"
    assert ahead.take(6) == {}, "a run not begun reads nothing"


def test_a_file_that_cannot_be_read_comes_back_as_its_error_and_unwanted_files_are_left_alone():
    disk = _Disk()
    ahead = ReadAhead(disk.read, wanted=lambda path: path != "kept")
    ahead.begin([(0, ["a", "missing.jpg", "kept"])])
    files = ahead.take(0)
    assert files["a"] == b"a" and isinstance(files["missing.jpg"], FileNotFoundError)
    assert "kept" not in files and "kept" not in disk.read_on


def test_a_new_epoch_forgets_the_runs_of_the_last():
    disk = _Disk()
    ahead = ReadAhead(disk.read, wanted=lambda path: True, depth=1)
    ahead.begin([(0, ["a"]), (1, ["b"])])
    ahead.begin([(0, ["c"])])
    assert ahead.take(0) == {"c": b"c"}
    assert ahead.take(1) == {}


def test_batches_decoded_in_this_process_are_those_of_a_worker_whose_files_are_read_where_decoded(coded_tree):
    tree = coded_tree(classes=2, per_class=6)
    samples = sorted((str(path), int(path.parent.name[-1])) for path in tree.rglob("*.jpg"))
    Path(samples[-1][0]).unlink()  # gone after the scan: skipped alike
    options = dict(batch_size=4, train=True, image_size=16, seed=5, crop_cache_mb=0)
    here, there = PilBackend(**options, num_workers=0), PilBackend(**options, num_workers=1)
    ahead = here._loader.dataset.read_ahead
    read_on, read = [], ahead.read
    ahead.read = lambda path: read_on.append(threading.current_thread().name) or read(path)
    for epoch in range(2):
        read_ahead = list(here.batches(samples, epoch))
        in_worker = list(there.batches(samples, epoch))
        for ours, theirs in zip(read_ahead, in_worker, strict=True):
            assert torch.equal(ours.images, theirs.images) and torch.equal(ours.labels, theirs.labels)
            assert [skip.path for skip in ours.skipped] == [skip.path for skip in theirs.skipped]
    assert sum(len(batch.skipped) for batch in read_ahead) == 1
    assert read_on and set(read_on) == {"read-ahead"}, "this process's files were read ahead, each epoch"
    assert len(read_on) == 2 * len(samples), "with no crops kept, every file is read in each epoch"
    here.close()
    there.close()
    assert all(thread.name != "read-ahead" for thread in threading.enumerate()), \
        "no reader is left once an epoch's runs are taken"
