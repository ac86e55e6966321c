"""Doctest setup for fastcore_ops.data: a small JPEG for the examples, and DALI's examples skipped where DALI cannot run."""

import pytest
from PIL import Image

from fastcore_ops.data.dali_backend import dali_available


@pytest.fixture(autouse=True)
def _doctest_files(request, doctest_namespace, tmp_path):
    if request.node.name.startswith("fastcore_ops.data.dali_backend.DaliBackend") and dali_available() is not None:
        pytest.skip(f"DALI cannot run here: {dali_available()}")
    red_jpeg = tmp_path / "red.jpg"
    Image.new("RGB", (64, 48), (200, 30, 30)).save(red_jpeg, quality=95)
    doctest_namespace["red_jpeg"] = str(red_jpeg)
