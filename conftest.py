"""Loaded by pytest before anything it collects, the docstring examples of training/ included.

Kernels run through Triton's interpreter unless a GPU is present, and fastcore_ops must then be
imported before any module imports triton (transformers does), since Triton fixes
interpreting when it is first imported.
"""

import os

os.environ.setdefault("FASTCORE_OPS_INTERPRET", "1")

import fastcore_ops  # noqa: E402, F401
