"""Bad data through build_loader: awkward files decode or are skipped, counted and named once per epoch."""

import itertools
import os
import shutil
import sys
import warnings
from pathlib import Path

import pytest
import torch

from fastcore_ops.data.backends.dali import dali_available
from fastcore_ops.data.backends.decoded import NothingDecodesError
from fastcore_ops.data.loader import SkippedImagesWarning, build_loader
from fastcore_ops.data.sources import DatasetScanWarning

from tests.hang_guard import run_guarded

from .conftest import class_of, huge_png_header

ROOT = Path(__file__).resolve().parents[2]

BACKENDS = [
    pytest.param("pil", id="pil"),
    pytest.param("dali", id="dali", marks=pytest.mark.skipif(dali_available() is not None, reason=f"DALI: {dali_available()}")),
]


def _options(backend):
    return dict(batch_size=4, image_size=16, backend=backend, num_workers=0 if backend == "pil" else 1)


def _run_epoch(loader):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        batches = list(loader)
    skips = [w for w in caught if issubclass(w.category, SkippedImagesWarning)]
    return batches, skips


@pytest.fixture
def mixed_tree(make_tree, real_jpegs, bad_files):
    """Two classes of real CIFAR JPEGs, each also holding every awkward kind of file."""
    reals = real_jpegs(6)
    tree = {}
    for label, name in enumerate(("a", "b")):
        tree[name] = {f"real{i}.jpg": path.read_bytes() for i, path in enumerate(reals[label * 3 : label * 3 + 3])}
        tree[name].update({f"{label}_{file}": data for file, (data, _) in bad_files().items()})
    return make_tree(tree)


@pytest.mark.parametrize("backend", BACKENDS)
def test_awkward_files_decode_or_are_skipped_and_named_once_per_epoch(mixed_tree, bad_files, backend):
    kinds = bad_files()
    unusable = {f"{label}_{file}" for label in (0, 1) for file, (_, ok) in kinds.items() if not ok}
    decodable = {f"{label}_{file}" for label in (0, 1) for file, (_, ok) in kinds.items() if ok}
    total = 6 + len(unusable) + len(decodable)
    loader = build_loader(mixed_tree, train=True, drop_last=False, **_options(backend))
    for epoch in (0, 1):
        loader.set_epoch(epoch)
        batches, skips = _run_epoch(loader)
        assert len(skips) == 1, "exactly one warning per epoch"
        message = str(skips[0].message)
        named = {name for name in unusable | decodable if f"{name}: " in message}
        assert message.startswith(f"epoch {epoch}: skipped {len(named)} ")
        assert unusable <= named  # every broken file is named with its reason
        if backend == "pil":
            assert named == unusable  # and Pillow decodes every other kind
        images = torch.cat([x for x, _ in batches])
        # Training refills every batch to its run's length with stand-ins for the skipped files.
        assert [len(x) for x, _ in batches] == [4] * (total // 4) + [total % 4] * (total % 4 > 0)
        assert torch.isfinite(images).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_skipped_files_never_shift_a_label_onto_another_image(coded_tree, bad_files, backend):
    root = coded_tree(classes=3, per_class=4)
    broken = [(file, data) for file, (data, ok) in bad_files().items() if not ok]
    for label in range(3):
        for file, data in broken:
            (root / f"class{label}" / f"001_{file}").write_bytes(data)
    for train in (True, False):
        loader = build_loader(root, train=train, drop_last=False, **{**_options(backend), "batch_size": 5})
        batches, skips = _run_epoch(loader)
        images = torch.cat([x for x, _ in batches])
        labels = torch.cat([y for _, y in batches]).tolist()
        assert class_of(images) == labels  # stand-ins too carry their own file's label
        assert len(skips) == 1 and f"skipped {3 * len(broken)} " in str(skips[0].message)
        if train:
            assert len(labels) == 12 + 3 * len(broken)  # every batch refilled to its run's length
        else:
            assert sorted(labels) == [0] * 4 + [1] * 4 + [2] * 4  # evaluation counts each image once


def test_a_long_skip_list_names_ten_files_and_counts_the_rest(coded_tree):
    root = coded_tree(classes=1, per_class=2)
    for i in range(13):
        (root / "class0" / f"zz{i:02d}.jpg").write_bytes(b"")
    batches, skips = _run_epoch(build_loader(root, train=False, **_options("pil")))
    message = str(skips[0].message)
    assert message.startswith("epoch 0: skipped 13 ")
    assert message.count("empty file") == 10 and "and 3 more" in message
    assert sum(len(y) for _, y in batches) == 2


def test_a_clean_epoch_warns_nothing(coded_tree):
    _, skips = _run_epoch(build_loader(coded_tree(classes=2, per_class=2), train=False, **_options("pil")))
    assert skips == []


def test_a_file_deleted_after_the_scan_is_skipped_not_fatal(coded_tree):
    root = coded_tree(classes=2, per_class=2)
    loader = build_loader(root, train=False, **_options("pil"))
    (root / "class1" / "000.jpg").unlink()
    batches, skips = _run_epoch(loader)
    assert sum(len(y) for _, y in batches) == 3
    assert "class1/000.jpg: " in str(skips[0].message) and "No such file" in str(skips[0].message)


@pytest.mark.parametrize("layout, error, message", [
    ("missing", FileNotFoundError, "does not exist"),
    ("empty", ValueError, "no class sub-folders"),
    ("empty_class", ValueError, "class folder.*'b'"),
    ("no_images", ValueError, "no images in any"),
])
def test_unusable_trees_fail_before_any_work(tmp_path, real_jpegs, layout, error, message):
    root = tmp_path / "root"
    if layout != "missing":
        root.mkdir()
    if layout in ("empty_class", "no_images"):
        (root / "a").mkdir()
        (root / "b").mkdir()
        (root / "b" / "notes.txt").write_text("not an image")
    if layout == "empty_class":
        shutil.copy(real_jpegs(1)[0], root / "a" / "0.jpg")
    with pytest.raises(error, match=message):
        build_loader(root, batch_size=2, train=True, image_size=16, backend="pil")


@pytest.fixture
def holey_tree(coded_tree, bad_files):
    """Colour-coded classes with unreadable files sprinkled among the good ones."""
    root = coded_tree(classes=3, per_class=6)
    broken = [data for data, ok in bad_files().values() if not ok]
    for label in range(3):
        for index, data in enumerate(broken):
            (root / f"class{label}" / f"00{2 * index}_bad.jpg").write_bytes(data)
    return root


def _batches_of(loader, epoch, first_batch=0):
    loader.set_epoch(epoch, first_batch)
    batches, skips = _run_epoch(loader)
    return batches, skips


@pytest.mark.parametrize("backend", BACKENDS)
def test_training_batches_with_skipped_files_keep_their_shape_and_labels(holey_tree, backend):
    loader = build_loader(holey_tree, train=True, **{**_options(backend), "batch_size": 5})
    batches, skips = _batches_of(loader, epoch=0)
    assert [len(x) for x, _ in batches] == [5] * len(loader)  # equal batches: no batch one image short
    for images, labels in batches:
        assert class_of(images) == labels.tolist()  # each stand-in carries its own file's label
    assert len(skips) == 1 and "_bad.jpg: " in str(skips[0].message)  # skipped files are still named


@pytest.mark.parametrize("backend", BACKENDS)
def test_refilled_batches_repeat_for_any_worker_count_and_when_resumed(holey_tree, backend):
    def epoch(workers, first_batch=0):
        loader = build_loader(holey_tree, train=True, seed=4, **{**_options(backend), "batch_size": 5,
                                                                 "num_workers": workers})
        batches, _ = _batches_of(loader, epoch=2, first_batch=first_batch)
        return batches

    few, many, resumed = epoch(1), epoch(2), epoch(1, first_batch=3)
    for (x, y), (x2, y2) in zip(few, many):
        assert torch.equal(x, x2) and torch.equal(y, y2)
    assert len(resumed) == len(few) - 3
    for (x, y), (x2, y2) in zip(few[3:], resumed):
        assert torch.equal(x, x2) and torch.equal(y, y2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_epoch_of_only_unreadable_files_is_a_clear_error(make_tree, backend):
    root = make_tree({"a": {f"{i}.jpg": b"" for i in range(3)}, "b": {"x.jpg": b"not a picture"}})
    with pytest.raises(NothingDecodesError, match="no file of this epoch's 4 samples can be decoded.*empty file"):
        _run_epoch(build_loader(root, train=True, **{**_options(backend), "batch_size": 2}))
    batches, skips = _run_epoch(build_loader(root, train=False, **{**_options(backend), "batch_size": 2}))
    assert batches == [] and "skipped 4 " in str(skips[0].message)  # evaluation: nothing to count, no refill


@pytest.mark.timeout(60)  # a named pipe that is opened waits for a writer forever: fail, do not hang
def test_a_named_pipe_among_the_images_is_never_opened_even_when_it_appears_after_the_scan(coded_tree):
    root = coded_tree(classes=2, per_class=3)
    os.mkfifo(root / "class0" / "pipe.jpg")
    with pytest.warns(DatasetScanWarning, match="pipe.jpg': it is a named pipe, not a regular file"):
        loader = build_loader(root, train=True, drop_last=False, **_options("pil"))
    swapped = root / "class1" / "001.jpg"
    swapped.unlink()
    os.mkfifo(swapped)  # where the scan found an image, the reader now finds a pipe: it must not wait on it either
    batches, skips = _run_epoch(loader)
    assert sum(len(labels) for _, labels in batches) == 6  # the scan's six images, the swapped one stood in for
    assert "class1/001.jpg: a named pipe, not a regular file: left unread" in str(skips[0].message)


def test_skipped_files_are_named_when_an_epoch_is_left_before_its_end_and_kept_with_their_reason(coded_tree):
    root = coded_tree(classes=2, per_class=4)
    (root / "class0" / "000_empty.jpg").write_bytes(b"")  # sorted second: in the first batch
    (root / "class1" / "000_huge.png").write_bytes(huge_png_header())  # sorted seventh: in the fourth batch
    loader = build_loader(root, train=True, shuffle=False, **{**_options("pil"), "batch_size": 2})
    for epoch in (0, 1):  # a run's last epoch ends at its last step, with batches left: the loader is dropped
        loader.set_epoch(epoch)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            batches = iter(loader)
            assert len(list(itertools.islice(batches, len(loader) - 1))) == len(loader) - 1
            del batches
        messages = [str(w.message) for w in caught if issubclass(w.category, SkippedImagesWarning)]
        assert len(messages) == 1 and messages[0].startswith(f"epoch {epoch}: skipped 2 ")
        assert "000_empty.jpg: empty file" in messages[0] and "000_huge.png: DecompressionBombError" in messages[0]
    assert {Path(path).name: reason.split(":")[0] for path, reason in loader.skipped_files.items()} == \
        {"000_empty.jpg": "empty file", "000_huge.png": "DecompressionBombError"}


# PyTorch warns about a read-only array once per process: a fresh one shows whether the refill path makes one.
_REFILL_IN_A_FRESH_PROCESS = """
import sys, warnings
warnings.simplefilter("ignore", UserWarning)  # the skipped files named, plain Pillow in use
warnings.filterwarnings("error", message="The given NumPy array is not writable")
from fastcore_ops.data.loader import build_loader
loader = build_loader(sys.argv[1], train=True, batch_size=5, image_size=16, backend="pil", num_workers=0)
print(sum(len(labels) for _, labels in loader), len(loader))
"""


def test_refilling_a_batch_hands_torch_no_read_only_array(holey_tree):
    done = run_guarded([sys.executable, "-c", _REFILL_IN_A_FRESH_PROCESS, str(holey_tree)], cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    images, batches = map(int, done.stdout.split())
    assert images == 5 * batches  # every batch was refilled to its full length, in this process
