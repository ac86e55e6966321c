"""Fixtures for the trainer tests: a small CIFAR-10 tree of real images, linked from ../shared/datasets."""

import pytest

from fastcore_ops.training.compute_threads import torch_threads
from tests.data.conftest import DATASETS

CIFAR = DATASETS / "cifar10-jpeg"

# toy_recipe.py registers a recipe as it loads: only the pytest runs that test_toy_recipe.py starts import it (-p),
# so that the registry of the process running the suite keeps the project's own recipes. stop_gate.py changes the
# trainer as it loads: only the runs the stop tests start import it (--import).
collect_ignore = ["toy_recipe.py", "stop_gate.py"]


@pytest.fixture(scope="package", autouse=True)
def one_compute_thread():
    """Training in this process computes on one thread, as the children do (see the root conftest.py).

    Package-scoped, so that module-scoped fixtures that train run on one thread too.
    """
    with torch_threads(1):
        yield


def link_cifar_subset(root, *, train_per_class: int, test_per_class: int):
    """``root/train`` and ``root/test`` ImageFolders holding the first images of each CIFAR-10 class (symlinks)."""
    assert CIFAR.is_dir(), f"the shared CIFAR-10 images are missing: expected {CIFAR} (see the project README)"
    for split, count in (("train", train_per_class), ("test", test_per_class)):
        for class_dir in sorted((CIFAR / split).iterdir()):
            target = root / split / class_dir.name
            target.mkdir(parents=True)
            for image in sorted(class_dir.iterdir())[:count]:
                (target / image.name).symlink_to(image)
    return root


@pytest.fixture(scope="session")
def tiny_cifar(tmp_path_factory):
    """60 training and 20 test images per class."""
    return link_cifar_subset(tmp_path_factory.mktemp("cifar"), train_per_class=60, test_per_class=20)


def micro_cifar_tree(root):
    """2 training and 2 test images per class: for runs that only need to train a few steps."""
    return link_cifar_subset(root, train_per_class=2, test_per_class=2)


@pytest.fixture(scope="session")
def micro_cifar(tmp_path_factory):
    """:func:`micro_cifar_tree` in a folder of the session."""
    return micro_cifar_tree(tmp_path_factory.mktemp("micro-cifar"))


@pytest.fixture(scope="session", autouse=True)
def token_cache(tmp_path_factory):
    """Prepared tokens go to a folder of this test session, not the user's cache (child processes inherit it)."""
    folder = tmp_path_factory.mktemp("token-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FASTCORE_OPS_CACHE", str(folder))
        yield folder


def _stdlib_sample(root, *, files: int, size: int):
    """``files`` real Python source files of the standard library, each cut to its first ``size`` bytes."""
    from fastcore_ops.training.text.corpus import source_files, stdlib_root

    names = [name for name in source_files(stdlib_root()) if (stdlib_root() / name).stat().st_size > size][:files]
    for index, name in enumerate(names):
        (root / f"m{index:02d}.py").write_bytes((stdlib_root() / name).read_bytes()[:size])
    return root


@pytest.fixture(scope="session")
def tiny_text(tmp_path_factory):
    """20 files of 3 KB: 18 to train on (54,000 tokens), 2 for validation."""
    return _stdlib_sample(tmp_path_factory.mktemp("tiny-text"), files=20, size=3000)


def micro_text_tree(root):
    """10 files of 340 bytes: 9 to train on (3,060 tokens), 1 for validation."""
    return _stdlib_sample(root, files=10, size=340)


@pytest.fixture(scope="session")
def micro_text(tmp_path_factory):
    """:func:`micro_text_tree` in a folder of the session."""
    return micro_text_tree(tmp_path_factory.mktemp("micro-text"))
