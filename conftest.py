"""Loaded by pytest before anything it collects, the docstring examples of the packages included.

Kernels run through Triton's interpreter unless a GPU is present, and fastcore_ops must then be
imported before any module imports triton (transformers does), since Triton fixes
interpreting when it is first imported. The installed package holds no conftest.py: the
fixtures its docstring examples use are here.
"""

import os

os.environ.setdefault("FASTCORE_OPS_INTERPRET", "1")

import fastcore_ops  # noqa: E402, F401
import pytest  # noqa: E402
import torch  # noqa: E402

# The training command computes with the cores other work leaves idle (training/compute_threads.py);
# tests that train, in this process or a child, use PyTorch's default instead, however busy the box.
os.environ.setdefault("OMP_NUM_THREADS", str(torch.get_num_threads()))
from PIL import Image  # noqa: E402

from fastcore_ops.data.dali_backend import dali_available  # noqa: E402


@pytest.fixture(autouse=True)
def _data_doctest_files(request, doctest_namespace):
    """fastcore_ops.data's examples: a small JPEG, and DALI's examples skipped where DALI cannot run."""
    if not request.node.name.startswith("fastcore_ops.data."):
        return
    if request.node.name.startswith("fastcore_ops.data.dali_backend.DaliBackend") and dali_available() is not None:
        pytest.skip(f"DALI cannot run here: {dali_available()}")
    red_jpeg = request.getfixturevalue("tmp_path") / "red.jpg"
    Image.new("RGB", (64, 48), (200, 30, 30)).save(red_jpeg, quality=95)
    doctest_namespace["red_jpeg"] = str(red_jpeg)
