"""Fixtures of the tradeoff and ablation command tests."""

import pytest


@pytest.fixture
def data(tmp_path):
    """A data folder the sweeps accept (train/ and test/), empty: the tests never train on it."""
    for split in ("train", "test"):
        (tmp_path / "data" / split).mkdir(parents=True)
    return tmp_path / "data"
