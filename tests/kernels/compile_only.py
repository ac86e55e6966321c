"""``pytest -p tests.kernels.compile_only``: each kernel test's launches compiled for sm_90, and made nowhere.

Loaded before the conftests, it turns Triton's interpreter off and unskips the bf16 cases (which the interpreter
gets wrong); then every test runs with CPU tensors sent down the Triton path and Triton's driver replaced by
``benchmarks.kernels.fake_driver``'s, so that each launch compiles into Triton's cache the binary a GPU's run of the
test would (the same shapes, strides, dtypes and alignments) and launches nothing. No kernel computes anything, so
the tests' outcomes mean nothing: this fills the cache ``python -m benchmarks.kernels.precompile`` (its ``tests``
part) makes for a lent GPU. Imported without ``-p`` (the suite's doctest collection), it changes nothing.
"""

import os

import pytest


def pytest_load_initial_conftests(early_config, parser, args):
    """Before conftest.py sets up the interpreter: off, each kernel's first config as in the suite on a GPU, and
    the bf16 cases on (tests/conftest.py)."""
    os.environ.update(FASTCORE_OPS_COMPILE_ONLY="1", FASTCORE_OPS_INTERPRET="0", FASTCORE_OPS_AUTOTUNE="0")
    os.environ.pop("TRITON_INTERPRET", None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    from benchmarks.kernels.compiling import compiling_only

    with compiling_only():
        return (yield)
