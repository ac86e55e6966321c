"""Where a kernel runs: the one place that looks at devices, at Triton's interpreter, and at Triton itself.

CUDA tensors run the Triton kernels. CPU tensors run the pure-PyTorch references,
unless ``FASTCORE_OPS_INTERPRET=1`` (or Triton's own ``TRITON_INTERPRET=1``) is set
before ``fastcore_ops`` is imported: then the Triton kernels run on the CPU through
Triton's interpreter, which is how the test suite exercises every kernel on machines
without a GPU.

Triton is optional (there is none for macOS or Windows, and CPU-only images often lack it):
the kernel modules take ``triton`` and ``tl`` from here, and without Triton these are a
stand-in whose decorators leave functions undecorated. The kernels are then never launched:
CPU tensors run the references, and asking for a kernel (a CUDA tensor, or the interpreter
variables) raises a :class:`TritonMissingError` that says how to install Triton.

Compiled on a GPU, a kernel declared with several configs (tile shapes) runs the one that the
committed table ``tuned_configs.json`` holds for its key, else its first: no call benchmarks
configs unless ``FASTCORE_OPS_AUTOTUNE=1`` asks (see :func:`autotune_mode`). On a GPU,
``python -m benchmarks.kernels.retune`` tunes every kernel's benchmark sizes and rewrites the table.

Example:
    >>> import torch
    >>> from fastcore_ops.kernels import backend
    >>> backend.use_triton(torch.zeros(1)) == backend.INTERPRETING  # on a CPU, Triton only to interpret
    True
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import math
import os
import sys
import types
from collections.abc import Callable
from pathlib import Path

import numpy
import torch

from fastcore_ops.kernels.fast_launch import KnownKeyLaunch

INTERPRET_VARIABLE = "FASTCORE_OPS_INTERPRET"

# Triton decides between compiling and interpreting when a function is decorated, its own
# library functions (tl.zeros, ...) included, so the variable must be set before Triton is
# first imported.
if os.environ.get(INTERPRET_VARIABLE, "0") == "1" and os.environ.get("TRITON_INTERPRET") != "1":
    if "triton" in sys.modules:
        raise RuntimeError(
            f"{INTERPRET_VARIABLE}=1 asks for Triton's interpreter, but triton was imported before "
            f"fastcore_ops.kernels without TRITON_INTERPRET=1; import fastcore_ops.kernels first, or set "
            f"TRITON_INTERPRET=1 in the environment"
        )
    os.environ["TRITON_INTERPRET"] = "1"

INTERPRETING: bool = os.environ.get("TRITON_INTERPRET", "0") == "1"

AUTOTUNE_VARIABLE = "FASTCORE_OPS_AUTOTUNE"


def autotune_mode(value: str | None) -> str:
    """How a kernel with several configs picks one, by the value of ``FASTCORE_OPS_AUTOTUNE``.

    Unset: ``"table"``, the committed table's config for the key, else the first (never tuning);
    ``1``: ``"tune"``, Triton benchmarks every config at each new key; ``0``: ``"first"``, the first
    config alone (the test suite on a GPU, where it checks values, not speed).

        >>> autotune_mode(None), autotune_mode("1"), autotune_mode("0")
        ('table', 'tune', 'first')
    """
    modes = {None: "table", "": "table", "1": "tune", "0": "first"}
    if value not in modes:
        raise ValueError(f"{AUTOTUNE_VARIABLE}={value!r}: use 1 to tune, 0 for each kernel's first config, "
                         f"or leave it unset for the table of tuned configs")
    return modes[value]


# Read once, when fastcore_ops is imported: the kernel modules build their autotuners then.
AUTOTUNE_MODE: str = autotune_mode(os.environ.get(AUTOTUNE_VARIABLE))


class TritonMissingError(RuntimeError):
    """A Triton kernel was asked for (a CUDA tensor, or the interpreter) where Triton is not installed."""


def _stand_in_triton() -> tuple[types.ModuleType, types.ModuleType]:
    """Just enough of ``triton`` and ``triton.language`` for the kernel modules to import.

    Decorators return the function itself and configs are inert; the host-side arithmetic the
    custom ops do on empty inputs (which launch nothing) is this module's own (:func:`cdiv`).
    """
    language = types.ModuleType("triton.language (stand-in: Triton is not installed)")
    language.constexpr = lambda value=None: value
    stand_in = types.ModuleType("triton (stand-in: Triton is not installed)")
    stand_in.language = language
    stand_in.jit = lambda function=None, **options: function if function is not None else (lambda f: f)
    stand_in.autotune = lambda *args, **kwargs: (lambda function: function)
    stand_in.Config = lambda *args, **kwargs: None
    return stand_in, language


try:
    import triton  # noqa: E402  (must come after TRITON_INTERPRET is settled)
    import triton.language as tl  # noqa: E402

    TRITON_AVAILABLE = True
except ImportError:
    triton, tl = _stand_in_triton()
    TRITON_AVAILABLE = False

if INTERPRETING and TRITON_AVAILABLE:
    from fastcore_ops.kernels.interpreter_patches import skip_repeated_language_patches  # noqa: E402

    skip_repeated_language_patches()


def _require_triton(reason: str) -> None:
    if not TRITON_AVAILABLE:
        raise TritonMissingError(
            f"{reason} needs Triton, which is not installed; install it with `pip install triton` (Linux only), "
            f"or unset {INTERPRET_VARIABLE} and TRITON_INTERPRET to run the PyTorch references on the CPU"
        )


def interpreter_problem(triton_version: str, numpy_version: str) -> str | None:
    """Why Triton's interpreter cannot run the kernels with these versions, or None.

        >>> interpreter_problem("3.6.0", "2.4.6")[:61]
        "Triton 3.6.0's interpreter turns one-element arrays into ints"
        >>> interpreter_problem("3.6.0", "2.3.5") is None and interpreter_problem("3.8.0", "2.4.6") is None
        True
    """
    def release(version: str) -> tuple[int, int]:
        major, minor = version.split(".")[:2]
        return int(major), int("".join(filter(str.isdigit, minor)) or 0)

    if release(triton_version) < (3, 7) and release(numpy_version) >= (2, 4):
        return (f"Triton {triton_version}'s interpreter turns one-element arrays into ints with int(), which NumPy "
                f"{numpy_version} refuses (triton-lang/triton#9171): install numpy<2.4, or Triton 3.7 or newer")
    return None


def use_triton(*tensors: torch.Tensor) -> bool:
    """True when the Triton kernel should run for these tensors, False for the reference.

    The caller has already checked that all tensors share one device. Raises
    :class:`TritonMissingError` when the kernel is wanted but Triton is not installed.
    """
    device_type = tensors[0].device.type
    if device_type == "cuda":
        _require_triton("a CUDA tensor")
        return True
    if device_type == "cpu" and INTERPRETING:
        _require_triton("TRITON_INTERPRET=1 (or FASTCORE_OPS_INTERPRET=1)")
        problem = interpreter_problem(triton.__version__, numpy.__version__)
        if problem is not None:
            raise RuntimeError(problem)
        return True
    return False


def autotune(configs: list[triton.Config], key: list[str], interpreter_config: triton.Config | None = None,
             untuned: Callable[[list[triton.Config], dict], triton.Config] | None = None,
             valid: Callable[[triton.Config, dict], bool] | None = None):
    """``triton.autotune`` that also works under the interpreter, and tunes only when asked.

    The interpreter has no GPU benchmarker, so there a single config runs as is (with one
    config Triton does not benchmark): ``interpreter_config`` if given, else the first.
    The interpreter's cost is per block operation, so large tiles make it fast. Compiled, the
    kernel runs what :data:`AUTOTUNE_MODE` says: by default the config that the table of tuned
    configs (:data:`TUNED_CONFIGS`) holds for its key, else ``untuned(configs, arguments)``'s choice
    for the launch's arguments (default: the first config), benchmarking nothing.
    ``valid(config, arguments)``, where given, leaves out the configs a launch cannot run, tuning too; the
    first config (the interpreter's, unless given) must then suit every launch.
    The autotuner is registered in :data:`TUNERS` under its table name; the kernel module gets it wrapped in
    :class:`~fastcore_ops.kernels.fast_launch.KnownKeyLaunch`, which skips its Python at a key it has met.
    """
    if not TRITON_AVAILABLE:
        return triton.autotune(configs=configs, key=key)  # the stand-in: the function stays undecorated

    def decorate(fn):
        name = _table_name(fn)
        # Checked in every mode, so a table gone stale (a config renamed or dropped) fails the CPU test suite too.
        choices = frozen_choices(name, configs, _committed_table(), TUNED_CONFIGS)
        if INTERPRETING:
            tuner = triton.autotune(configs=[interpreter_config or configs[0]], key=key, do_bench=_no_benchmark)(fn)
        elif AUTOTUNE_MODE == "first":
            tuner = triton.autotune(configs=configs[:1], key=key)(fn)
        else:
            tuner = table_autotune(configs, key, choices, untuned, valid)(fn)
        TUNERS[name] = tuner
        return KnownKeyLaunch(tuner)

    return decorate


def table_autotune(configs: list[triton.Config], key: list[str], choices: dict[str, triton.Config],
                   untuned: Callable[[list[triton.Config], dict], triton.Config] | None = None,
                   valid: Callable[[triton.Config, dict], bool] | None = None):
    """``triton.autotune`` over ``configs`` that runs ``choices[str(key)]`` (else ``untuned``'s choice, by default
    the first config) without benchmarking, and tunes only in the ``"tune"`` mode or inside :func:`tuning`.

    Made of public API that Triton 3.6 and 3.8 share: ``prune_configs_by`` leaves the chosen config
    alone when not tuning, and ``do_bench`` measures nothing then (Triton 3.8 does not benchmark
    a single config left, 3.6 does).
    """
    # Tuning benchmarks every config at every new key, and on a GPU it was most of the kernels'
    # first calls: 87% of the GPU check's correctness part (reports/gpu-check-h200-20261128). These
    # kernels run for microseconds to milliseconds, so a short benchmark ranks their configs, and in
    # the "tune" mode the choice is kept in Triton's cache folder for the next process (Triton 3.2 and newer).
    keep = AUTOTUNE_MODE == "tune" and "cache_results" in inspect.signature(triton.autotune).parameters

    def decorate(fn):
        lookup = _TableLookup(choices, key, fn.arg_names, untuned or _first_config, valid)
        return triton.autotune(configs=configs, key=key, prune_configs_by={"early_config_prune": lookup.prune},
                               do_bench=lookup.benchmark, **({"cache_results": True} if keep else {}))(fn)

    return decorate


def _first_config(configs: list[triton.Config], arguments: dict) -> triton.Config:
    """The config a kernel runs at a key the table lacks, unless it says otherwise: its first."""
    return configs[0]


class _TableLookup:
    """The table's side of one autotuner: which configs Triton may try at a new key, and how it times them."""

    def __init__(self, choices: dict[str, triton.Config], key: list[str], arg_names: list[str],
                 untuned: Callable[[list[triton.Config], dict], triton.Config],
                 valid: Callable[[triton.Config, dict], bool] | None = None):
        self.choices = choices
        self.key = key
        self.arg_names = arg_names
        self.untuned = untuned
        self.valid = valid

    def prune(self, configs: list[triton.Config], named_args: dict, **kwargs) -> list[triton.Config]:
        """Every config the launch can run when tuning, else the table's for its key, else the untuned choice."""
        arguments = {**named_args, **kwargs}
        if self.valid is not None:
            configs = [config for config in configs if self.valid(config, arguments)]
        if _tuning_wanted():
            return configs
        chosen = self.choices.get(str(tuning_key(self.key, self.arg_names, arguments)))
        return [chosen if chosen is not None else self.untuned(configs, arguments)]

    def benchmark(self, kernel_call, quantiles):
        if not _tuning_wanted():  # the one config the table left: Triton 3.6 times it anyway, to no purpose
            return [0.0] * len(quantiles)
        return _short_benchmark(kernel_call, quantiles)


def tuning_key(key: list[str], arg_names: list[str], arguments: dict) -> tuple:
    """The key Triton's autotuner files a launch under (3.6 and 3.8 alike): the values of the ``key``
    arguments, then the dtype of every tensor argument, in argument order. The table holds it as ``str()``.

        >>> x = torch.zeros(2, dtype=torch.float16)
        >>> str(tuning_key(["C_BUCKET", "CAUSAL"], ["x", "C_BUCKET", "CAUSAL"], {"x": x, "C_BUCKET": 64,
        ...                                                                       "CAUSAL": True, "grid": (1,)}))
        "(64, True, 'torch.float16')"
    """
    arguments = {name: value for name, value in arguments.items() if name in arg_names}
    values = [arguments[name] for name in key if name in arguments]
    return tuple(values + [str(value.dtype) for value in arguments.values() if hasattr(value, "dtype")])


_FORCED_TUNING = False


def _tuning_wanted() -> bool:
    return AUTOTUNE_MODE == "tune" or _FORCED_TUNING


@contextlib.contextmanager
def tuning():
    """Inside the block, Triton benchmarks every config at each key it has not met, whatever the table holds
    (``python -m benchmarks.kernels.retune``); with ``FASTCORE_OPS_AUTOTUNE=0`` there is only one config to run."""
    global _FORCED_TUNING
    before, _FORCED_TUNING = _FORCED_TUNING, True
    try:
        yield
    finally:
        _FORCED_TUNING = before


def _short_benchmark(kernel_call, quantiles):
    import triton.testing

    return triton.testing.do_bench(kernel_call, warmup=5, rep=20, quantiles=quantiles)


def _no_benchmark(kernel_call, quantiles):
    raise RuntimeError("the Triton interpreter has no benchmarker; autotune must see a single config")


# ----------------------------------------------------------------------------------------
# The table of tuned configs: kernel name -> {str(tuning key) -> config}, written on a GPU by
# ``python -m benchmarks.kernels.retune`` and read as untrusted data (JSON only, every type checked).
# ----------------------------------------------------------------------------------------

TUNED_CONFIGS = Path(__file__).with_name("tuned_configs.json")
# Every autotuner the kernel modules built, by table name: its function's name, with "#2", "#3", ... for the
# further autotuners of one function, in the order its module builds them (ghost batch norm's: rows, planes, then flat).
TUNERS: dict[str, object] = {}


class TunedConfigError(ValueError):
    """The table of tuned configs cannot be used: it is not JSON, or not the table's shape, or names a config
    that its kernel does not declare."""


# The way out of a bad table: the kernels (retune among their importers) cannot be imported until it reads.
_TABLE_FIX = "reset it to {} (every kernel then runs its first config) and rerun python -m benchmarks.kernels.retune"


def _table_name(fn) -> str:
    while not inspect.isfunction(fn):  # a JITFunction (or the interpreter's) around the Python function
        fn = fn.fn
    taken = sum(1 for name in TUNERS if name.split("#")[0] == fn.__name__)
    return fn.__name__ if taken == 0 else f"{fn.__name__}#{taken + 1}"


@functools.cache
def _committed_table() -> dict:
    return load_tuned_configs(TUNED_CONFIGS)


def load_tuned_configs(path: Path) -> dict[str, dict[str, dict]]:
    """The table at ``path``, checked: a JSON object of kernel names, each an object of tuning keys
    (see :func:`tuning_key`), each a config ``{"kwargs": {...}, "num_warps": int, "num_stages": int}``.
    Raises :class:`TunedConfigError`, naming the file, for anything else."""
    table = read_json_table(path, "table of tuned configs", TunedConfigError, _TABLE_FIX)
    _check_table(table, path)
    return table


def read_json_table(path: Path, what: str, error_type: type[ValueError], fix: str):
    """The JSON at ``path``, one of the kernels' committed tables (``what``), read as untrusted data: NaN and
    Infinity refused. Raises ``error_type``, naming the file, where it cannot be read or is not JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"), parse_constant=_refuse_constant)
    except OSError as error:
        raise error_type(f"{path}: cannot read the {what} ({error.strerror or error})") from None
    except (ValueError, RecursionError) as error:  # not JSON, not UTF-8, NaN or Infinity, nested past Python's limit
        raise error_type(f"{path}: not a JSON {what} ({error}); {fix}") from None


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def _check_table(table, path: Path) -> None:
    def refuse(where: str, problem: str):
        raise TunedConfigError(f"{path}: {where}: {problem}; {_TABLE_FIX}")

    if not isinstance(table, dict):
        refuse("the table", "must be a JSON object of kernel names")
    for kernel, entries in table.items():
        if not isinstance(entries, dict):
            refuse(kernel, "must be a JSON object of tuning keys")
        for key, entry in entries.items():
            if not isinstance(entry, dict) or set(entry) != {"kwargs", "num_warps", "num_stages"}:
                refuse(f"{kernel} {key}", 'must be an object of exactly "kwargs", "num_warps" and "num_stages"')
            kwargs, warps, stages = entry["kwargs"], entry["num_warps"], entry["num_stages"]
            if not isinstance(kwargs, dict) or not all(_is_scalar(value) for value in kwargs.values()):
                refuse(f"{kernel} {key}", '"kwargs" must map names to numbers, booleans or strings')
            if not _is_whole(warps) or warps < 1 or warps & (warps - 1):
                refuse(f"{kernel} {key}", f'"num_warps" must be a power of two, got {warps!r}')
            if not _is_whole(stages) or stages < 0:
                refuse(f"{kernel} {key}", f'"num_stages" must be a whole number >= 0, got {stages!r}')


def _is_whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_scalar(value) -> bool:
    """A number (finite), boolean or string: what a config's meta-parameter may be; None, lists and objects not."""
    return isinstance(value, (int, str)) or (isinstance(value, float) and math.isfinite(value))


def frozen_choices(name: str, configs: list[triton.Config], table: dict, path: Path) -> dict[str, triton.Config]:
    """The configs ``table`` (read from ``path``) holds for kernel ``name``, by tuning key, each one of the
    kernel's declared ``configs``; a table config it does not declare is a :class:`TunedConfigError`."""
    declared = {_config_fields(config): config for config in configs}
    choices = {}
    for key, entry in table.get(name, {}).items():
        fields = (tuple(sorted(entry["kwargs"].items())), entry["num_warps"], entry["num_stages"])
        if fields not in declared:
            raise TunedConfigError(f"{path}: {name} {key}: {entry} is not one of the kernel's configs; {_TABLE_FIX}")
        choices[key] = declared[fields]
    return choices


def _config_fields(config: triton.Config) -> tuple:
    return tuple(sorted(config.kwargs.items())), config.num_warps, config.num_stages


def config_entry(config: triton.Config) -> dict:
    """``config`` as the table holds it."""
    return {"kwargs": dict(config.kwargs), "num_warps": config.num_warps, "num_stages": config.num_stages}


def chosen_configs() -> dict[str, dict[str, dict]]:
    """The config each registered autotuner runs at each key it has met, as the table holds them."""
    return {name: {str(key): config_entry(config) for key, config in tuner.cache.items()}
            for name, tuner in TUNERS.items() if getattr(tuner, "cache", None)}


# Host-side arithmetic in plain Python: Triton 3.8 makes triton.cdiv and triton.next_power_of_2
# constexpr functions whose call from the host costs about 15 µs, more than a small kernel's run.
# For kernels, which read only constexpr globals: the interpreter has no inline assembly (below).
_INTERPRETING = tl.constexpr(INTERPRETING)


@triton.jit
def fast_log2(x):
    """log2 of fp32 ``x`` (not subnormal) in one MUFU.LG2, ``lg2.approx.ftz.f32``, where libdevice's precise log2
    takes 20 instructions; fp64 (gradcheck) and the interpreter take tl.log2. NVIDIA documents the approximation
    to about 22 bits; on a GPU, the kernels' value tests (``pytest -m gpu``) hold it to the reference."""
    # One return, after a compile-time if/else: Triton types a function by all its returns, even one after a
    # compile-time branch that returned, so two (fp64 and fp32) refused to compile for fp64.
    if _INTERPRETING or x.dtype != tl.float32:
        result = tl.log2(x)
    else:
        result = tl.inline_asm_elementwise("lg2.approx.ftz.f32 $0, $1;", "=f,f", [x], dtype=tl.float32,
                                           is_pure=True, pack=1)
    return result


def cdiv(a: int, b: int) -> int:
    """The ceiling of a / b, for grids: ``cdiv(10, 4) == 3``."""
    return -(-a // b)


def next_power_of_2(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1): ``next_power_of_2(33) == 64``."""
    return 1 << max(int(n) - 1, 0).bit_length()


def size_bucket(size: int) -> int:
    """The power of two at or above ``size``, which autotuners key on instead of the size itself.

    Sizes close together then share one tuning: each costs seconds per kernel on a GPU, and
    progressive resizing or a test's odd shapes would otherwise pay it at every new size.

        >>> size_bucket(33 * 31), size_bucket(33 * 33), size_bucket(1)
        (1024, 2048, 1)
    """
    return next_power_of_2(size)


def accumulator(dtype: torch.dtype):
    """The Triton dtype kernels accumulate in: fp64 for fp64 inputs (so gradcheck is exact), fp32 otherwise."""
    return tl.float64 if dtype == torch.float64 else tl.float32
