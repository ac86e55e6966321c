"""Fixtures for the trainer tests: a small CIFAR-10 tree of real images, linked from ../shared/datasets."""

import pytest

from tests.data.conftest import DATASETS

CIFAR = DATASETS / "cifar10-jpeg"


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


@pytest.fixture(scope="session")
def micro_cifar(tmp_path_factory):
    """2 training and 2 test images per class: for runs that only need to train a few steps."""
    return link_cifar_subset(tmp_path_factory.mktemp("micro-cifar"), train_per_class=2, test_per_class=2)
