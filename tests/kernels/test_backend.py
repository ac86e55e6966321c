import os
import subprocess
import sys
from types import SimpleNamespace
from unittest import mock

import pytest
import torch
import triton
import triton.language as tl
from triton.runtime.autotuner import Autotuner

from fastcore_ops.kernels import backend
from fastcore_ops.kernels.fast_launch import KnownKeyLaunch


def test_suite_runs_kernels_through_the_interpreter_or_a_gpu():
    # Without this, the kernel tests would silently test only the references on the CPU.
    assert backend.INTERPRETING or torch.cuda.is_available()


def test_cpu_tensors_use_triton_only_when_interpreting(monkeypatch):
    # The machine's Triton and NumPy may be a pair whose interpreter is refused (the lent H200's: Triton 3.6, NumPy
    # 2.5, where this test failed): that refusal has its own test below.
    monkeypatch.setattr(backend, "interpreter_problem", lambda triton_version, numpy_version: None)
    x = torch.zeros(2)
    monkeypatch.setattr(backend, "INTERPRETING", False)
    assert not backend.use_triton(x)
    monkeypatch.setattr(backend, "INTERPRETING", True)
    assert backend.use_triton(x)


def test_triton_3_6s_interpreter_with_numpy_2_4_is_refused_with_the_fix(monkeypatch):
    """triton-lang/triton#9171: that interpreter int()s one-element arrays, which NumPy 2.4 refuses."""
    monkeypatch.setattr(backend, "INTERPRETING", True)
    monkeypatch.setattr(backend.triton, "__version__", "3.6.0")
    monkeypatch.setattr(backend.numpy, "__version__", "2.4.6")
    with pytest.raises(RuntimeError, match=r"install numpy<2.4, or Triton 3.7 or newer"):
        backend.use_triton(torch.zeros(2))
    monkeypatch.setattr(backend.numpy, "__version__", "2.3.5")
    assert backend.use_triton(torch.zeros(2))


def test_cuda_tensors_use_triton():
    x = torch.empty(2, device="meta")
    assert not backend.use_triton(x)  # neither CPU nor CUDA: the reference path
    if torch.cuda.is_available():
        assert backend.use_triton(torch.zeros(2, device="cuda"))


def test_a_cuda_tensor_without_triton_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(backend, "TRITON_AVAILABLE", False)
    cuda_tensor = SimpleNamespace(device=torch.device("cuda"))  # use_triton only reads the device
    with pytest.raises(backend.TritonMissingError, match="a CUDA tensor needs Triton.*pip install triton"):
        backend.use_triton(cuda_tensor)
    monkeypatch.setattr(backend, "INTERPRETING", False)
    assert not backend.use_triton(torch.zeros(2))  # the CPU reference needs no Triton


def test_accumulator_is_fp64_only_for_fp64():
    assert backend.accumulator(torch.float64) == tl.float64
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        assert backend.accumulator(dtype) == tl.float32


@pytest.mark.skipif(not backend.INTERPRETING, reason="checks the interpreter's single-config autotune")
def test_autotune_keeps_one_config_under_the_interpreter():
    configs = [triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})]

    @backend.autotune(configs, key=["n"])
    @triton.jit
    def copy(src, dst, n, BLOCK: tl.constexpr):
        offsets = tl.arange(0, BLOCK)
        tl.store(dst + offsets, tl.load(src + offsets, mask=offsets < n), mask=offsets < n)

    src, dst = torch.arange(10.0), torch.zeros(10)
    copy[(1,)](src, dst, 10)
    assert copy.configs == configs[:1]
    torch.testing.assert_close(dst, src)


@triton.jit
def _twice(x):  # a helper: the interpreter runs it as a function of its own (the kernels' helpers are many)
    return x * 2


@triton.jit
def _double(src, dst, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offsets, _twice(tl.load(src + offsets)))


@pytest.mark.skipif(not backend.INTERPRETING, reason="checks Triton's interpreter")
def test_a_launch_patches_the_language_once_however_often_its_helpers_are_called(monkeypatch):
    from triton.runtime import interpreter
    scans = []
    original = interpreter._patch_builtin
    monkeypatch.setattr(interpreter, "_patch_builtin", lambda *args: scans.append(args) or original(*args))

    def scans_of_a_launch(programs: int) -> int:
        scans.clear()
        src = torch.arange(4.0 * programs)
        dst = torch.zeros_like(src)
        _double[(programs,)](src, dst, BLOCK=4)
        torch.testing.assert_close(dst, 2 * src)
        return len(scans)

    # Unpatched, each program's call of the helper scanned the language again: 8 programs, 8 more scans.
    assert scans_of_a_launch(1) == scans_of_a_launch(8) > 0


def test_interpreter_request_after_triton_import_is_a_clear_error():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env[backend.INTERPRET_VARIABLE] = "1"
    result = subprocess.run([sys.executable, "-c", "import triton; import fastcore_ops.kernels"], env=env,
                            capture_output=True, text=True)
    assert result.returncode != 0
    assert "import fastcore_ops.kernels first" in result.stderr


def test_autotuners_key_on_size_buckets_not_on_sizes():
    """Each tuning benchmarks every config (seconds a kernel on a GPU: reports/gpu-check-h200-20261128), so the
    keys hold power-of-two buckets of sizes and flags, never a raw size or stride that every new shape changes."""
    from fastcore_ops.kernels import alibi, bce, blur_maxpool, blurpool, ghost_batchnorm

    flags = {"CHANNELS_INNER", "TARGET_IS_INDEX", "CAUSAL", "INPUT_PRECISION", "HEAD_DIM_PADDED",
             "KERNEL", "STRIDE", "PADDING", "GROUP", "WORD"}  # the blurs' and pools' constexprs: each value compiles anew anyway
    modules = {module.__name__ for module in (alibi, bce, blur_maxpool, blurpool, ghost_batchnorm)}
    found = [tuner for tuner in backend.TUNERS.values() if tuner.base_fn.__module__ in modules]
    # alibi 3, bce 1, blurpool 2, blur_maxpool 1 + 2 (its forward's, one a layout), ghost batch norm 4 x 3
    assert all(isinstance(tuner, Autotuner) for tuner in found) and len(found) == 21
    for tuner in found:
        raw = [key for key in tuner.keys if not key.endswith("_BUCKET") and key not in flags]
        assert not raw, f"{tuner.base_fn.__name__} tunes anew at every value of {raw}"


def test_size_buckets_group_nearby_sizes():
    assert {backend.size_bucket(size) for size in (33 * 31, 1000, 1024)} == {1024}
    assert backend.size_bucket(1025) == 2048 and backend.size_bucket(0) == 1


def test_autotuning_can_be_switched_off_for_compiled_kernels():
    """FASTCORE_OPS_AUTOTUNE=0: the first config alone, so Triton benchmarks nothing (compiled mode, no GPU needed)."""
    script = ("from fastcore_ops.kernels import backend, blurpool\n"
              "assert not backend.INTERPRETING and backend.AUTOTUNE_MODE == 'first'\n"
              "assert blurpool._blurpool_forward_kernel.configs == blurpool._ROW_CONFIGS[:1]\n"
              "print('untuned')")
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "FASTCORE_OPS_INTERPRET")}
    result = subprocess.run([sys.executable, "-c", script], env={**env, "FASTCORE_OPS_AUTOTUNE": "0"},
                            capture_output=True, text=True)
    assert result.stdout.strip() == "untuned", result.stderr[-2000:]


# -- The table of tuned configs ----------------------------------------------------------------

_CONFIGS = [triton.Config({"BLOCK": 16}, num_warps=4), triton.Config({"BLOCK": 32}, num_warps=8)]


def _stand_in_kernel(runs: list) -> SimpleNamespace:
    """What Triton's autotuner needs of a kernel (its argument names, its function, ``run``), recording each run's
    meta-parameters instead of launching: the table's lookup runs as on a GPU, with no GPU."""
    def copy(src, n, N_BUCKET, BLOCK):
        pass

    return SimpleNamespace(fn=copy, arg_names=["src", "n", "N_BUCKET", "BLOCK"],
                           run=lambda *args, **kwargs: runs.append(kwargs))


def _launch(tuner, n: int, dtype=torch.float32) -> None:
    tuner.run(torch.zeros(n, dtype=dtype), n, N_BUCKET=backend.size_bucket(n), grid=(1,), warmup=False)


def _table_tuner(monkeypatch, table: dict, runs: list):
    monkeypatch.setattr(backend, "AUTOTUNE_MODE", "table")
    monkeypatch.setattr(backend, "_short_benchmark", lambda *args: pytest.fail("the table's lookup benchmarked"))
    choices = backend.frozen_choices("copy", _CONFIGS, table, backend.TUNED_CONFIGS)
    return backend.table_autotune(_CONFIGS, ["N_BUCKET"], choices)(_stand_in_kernel(runs))


def test_a_table_entry_runs_for_its_key_without_benchmarking(monkeypatch):
    runs = []
    table = {"copy": {"(16, 'torch.float32')": {"kwargs": {"BLOCK": 32}, "num_warps": 8, "num_stages": 3}}}
    tuner = _table_tuner(monkeypatch, table, runs)
    _launch(tuner, 10)
    assert len(runs) == 1 and runs[0]["BLOCK"] == 32 and runs[0]["num_warps"] == 8  # one launch: nothing timed


def test_a_key_missing_from_the_table_runs_the_first_config(monkeypatch):
    runs = []
    table = {"copy": {"(16, 'torch.float32')": {"kwargs": {"BLOCK": 32}, "num_warps": 8, "num_stages": 3}}}
    tuner = _table_tuner(monkeypatch, table, runs)
    _launch(tuner, 40)  # another size bucket
    _launch(tuner, 10, torch.float16)  # another dtype
    assert [(run["BLOCK"], run["num_warps"]) for run in runs] == [(16, 4), (16, 4)]


def test_a_key_missing_from_the_table_runs_the_kernels_untuned_choice(monkeypatch):
    """A kernel may choose by the launch's arguments where the table is silent (Ghost BatchNorm's planes fit their
    tile to the plane); the table's entry still wins where it has one."""
    runs = []
    monkeypatch.setattr(backend, "AUTOTUNE_MODE", "table")
    table = {"copy": {"(16, 'torch.float32')": {"kwargs": {"BLOCK": 16}, "num_warps": 4, "num_stages": 3}}}
    choices = backend.frozen_choices("copy", _CONFIGS, table, backend.TUNED_CONFIGS)
    def widest_for_large(configs, arguments):
        return configs[-1] if arguments["n"] > 20 else configs[0]

    tuner = backend.table_autotune(_CONFIGS, ["N_BUCKET"], choices, widest_for_large)(_stand_in_kernel(runs))
    _launch(tuner, 40)  # not in the table: the kernel's choice
    _launch(tuner, 10)  # in it
    assert [run["BLOCK"] for run in runs] == [32, 16]


def test_tuning_times_only_the_configs_a_launch_can_run(monkeypatch):
    """Ghost BatchNorm's flat tiles hold a plane bucket's planes only in some configs: ``valid`` leaves the others
    out, tuning too, where a config that skips part of the work would time fastest and be kept."""
    runs, timed = [], []
    configs = [triton.Config({"BLOCK": block}, num_warps=4) for block in (8, 16, 32)]

    def benchmark(kernel_call, quantiles):
        kernel_call()
        timed.append(runs[-1]["BLOCK"])
        return [float(runs[-1]["BLOCK"])] * len(quantiles)  # the smaller, the faster

    monkeypatch.setattr(backend, "AUTOTUNE_MODE", "table")
    monkeypatch.setattr(backend, "_short_benchmark", benchmark)
    holds = lambda config, arguments: config.kwargs["BLOCK"] >= arguments["N_BUCKET"]  # noqa: E731
    tuner = backend.table_autotune(configs, ["N_BUCKET"], {}, valid=holds)(_stand_in_kernel(runs))
    monkeypatch.setattr(backend, "TUNERS", {"copy": tuner})
    with backend.tuning():
        _launch(tuner, 12)  # bucket 16: BLOCK 8 cannot hold it
    _launch(tuner, 20)  # bucket 32, untuned: the first config that can
    assert sorted(timed) == [16, 32] and runs[-2]["BLOCK"] == 16 and runs[-1]["BLOCK"] == 32
    assert 8 not in [run["BLOCK"] for run in runs]


def test_tuning_times_every_config_and_the_table_takes_the_fastest(monkeypatch):
    """What python -m benchmarks.kernels.retune does on a GPU, with a stand-in benchmark: the choice per key."""
    runs, timed = [], []

    def benchmark(kernel_call, quantiles):
        kernel_call()
        timed.append(runs[-1]["BLOCK"])
        return [1.0 if runs[-1]["BLOCK"] == 32 else 2.0] * len(quantiles)

    tuner = _table_tuner(monkeypatch, {}, runs)
    monkeypatch.setattr(backend, "_short_benchmark", benchmark)
    monkeypatch.setattr(backend, "TUNERS", {"copy": tuner})
    with backend.tuning():
        _launch(tuner, 10)
    assert sorted(timed) == [16, 32] and runs[-1]["BLOCK"] == 32
    assert backend.chosen_configs() == {
        "copy": {"(16, 'torch.float32')": {"kwargs": {"BLOCK": 32}, "num_warps": 8, "num_stages": 3}}}


def test_a_key_met_before_launches_its_config_without_the_autotuner(monkeypatch):
    """KnownKeyLaunch: Triton's Autotuner.run chooses at a key's first launch only; later launches at that key run
    the config it chose, and a cache emptied for a retune sends the key back through it, which then times."""
    runs, timed = [], []
    table = {"copy": {"(16, 'torch.float32')": {"kwargs": {"BLOCK": 32}, "num_warps": 8, "num_stages": 3}}}
    tuner = KnownKeyLaunch(_table_tuner(monkeypatch, table, runs))
    with mock.patch.object(Autotuner, "run", autospec=True, side_effect=Autotuner.run) as through_autotuner:
        _launch(tuner, 10)
        _launch(tuner, 12)  # the same key: size bucket 16, fp32
        _launch(tuner, 10, torch.float16)  # another key: not in the table, the first config
        _launch(tuner, 11, torch.float16)
        assert through_autotuner.call_count == 2
        assert [(run["BLOCK"], run["num_warps"]) for run in runs] == [(32, 8), (32, 8), (16, 4), (16, 4)]

        def benchmark(kernel_call, quantiles):
            kernel_call()
            timed.append(runs[-1]["BLOCK"])
            return [1.0 if runs[-1]["BLOCK"] == 16 else 2.0] * len(quantiles)

        monkeypatch.setattr(backend, "_short_benchmark", benchmark)
        tuner.cache.clear()  # as benchmarks/kernels/tuning.py does before retuning
        with backend.tuning():
            _launch(tuner, 10)
        assert through_autotuner.call_count == 3 and sorted(timed) == [16, 32] and runs[-1]["BLOCK"] == 16


_ENTRY = '{"kwargs": {"BLOCK": 32}, "num_warps": 8, "num_stages": 3}'


@pytest.mark.parametrize("text, said", [
    ("{not json", "not a JSON table"),
    ("[]", "the table: must be a JSON object"),
    ('{"copy": []}', "copy: must be a JSON object of tuning keys"),
    ('{"copy": {"(16,)": {"kwargs": {"BLOCK": 32}, "num_warps": 8}}}', 'exactly "kwargs", "num_warps"'),
    ('{"copy": {"(16,)": {"kwargs": {"BLOCK": 32}, "num_warps": 8, "num_stages": 3, '
     '"pre_hook": "__import__(\'os\').system(\'true\')"}}}', 'exactly "kwargs", "num_warps"'),
    ('{"copy": {"(16,)": {"kwargs": {"BLOCK": null}, "num_warps": 8, "num_stages": 3}}}', '"kwargs" must map'),
    ('{"copy": {"(16,)": {"kwargs": {"BLOCK": NaN}, "num_warps": 8, "num_stages": 3}}}', "not a JSON table"),
    ('{"copy": {"(16,)": {"kwargs": {"BLOCK": 32}, "num_warps": 6, "num_stages": 3}}}', '"num_warps" must be'),
    ('{"copy": {"(16,)": {"kwargs": {"BLOCK": 32}, "num_warps": true, "num_stages": 3}}}', '"num_warps" must be'),
    ('{"copy": {"(16,)": {"kwargs": {"BLOCK": 32}, "num_warps": 8, "num_stages": "3"}}}', '"num_stages" must be'),
])
def test_a_malformed_table_is_refused_naming_the_file(text, said, tmp_path):
    path = tmp_path / "tuned_configs.json"
    path.write_text(text)
    with pytest.raises(backend.TunedConfigError, match="tuned_configs.json") as refusal:
        backend.load_tuned_configs(path)
    assert str(path) in str(refusal.value) and said in str(refusal.value)


def test_a_missing_table_is_refused_naming_the_file(tmp_path):
    with pytest.raises(backend.TunedConfigError, match=f"{tmp_path / 'absent.json'}: cannot read"):
        backend.load_tuned_configs(tmp_path / "absent.json")


def test_a_table_config_its_kernel_does_not_declare_is_refused(tmp_path):
    path = tmp_path / "tuned_configs.json"
    path.write_text('{"copy": {"(16,)": ' + _ENTRY.replace("32", "64") + "}}")
    table = backend.load_tuned_configs(path)  # well-formed: only the kernel knows its configs
    with pytest.raises(backend.TunedConfigError, match=f"{path}: copy \\(16,\\): .* not one of the kernel's configs"):
        backend.frozen_choices("copy", _CONFIGS, table, path)


def test_the_committed_table_names_only_declared_kernels():
    """Each entry is one of its kernel's configs (checked when the kernel modules were imported); the wheel
    ships it (tests/test_install.py)."""
    # They register their tuners.
    from fastcore_ops.kernels import alibi, bce, blur_maxpool, blurpool, ghost_batchnorm  # noqa: F401

    table = backend.load_tuned_configs(backend.TUNED_CONFIGS)
    assert set(table) <= set(backend.TUNERS), set(table) - set(backend.TUNERS)


def test_every_committed_key_has_its_autotuner_s_shape():
    """A key is the values of the autotuner's key arguments, then a dtype a tensor: an entry of another shape (its
    kernel's key changed since it was tuned) would never be found, and the kernel would run untuned."""
    import ast

    # They register their tuners.
    from fastcore_ops.kernels import alibi, bce, blur_maxpool, blurpool, ghost_batchnorm  # noqa: F401

    for name, entries in backend.load_tuned_configs(backend.TUNED_CONFIGS).items():
        tuner = backend.TUNERS[name]
        tensors = sum(argument.endswith("_ptr") for argument in tuner.arg_names)
        for key in entries:
            values = ast.literal_eval(key)
            named, dtypes = values[:len(tuner.keys)], values[len(tuner.keys):]
            assert not any(str(value).startswith("torch.") for value in named), (name, key, tuner.keys)
            assert 1 <= len(dtypes) <= tensors and all(str(dtype).startswith("torch.") for dtype in dtypes), \
                (name, key, tuner.keys)


def test_a_blur_s_stride_is_part_of_its_tuning_key():
    """On the H200 a stride-1 blur ran the config tuned for the stride-2 blur whose channels and outputs fall in the
    same buckets (256x256x28x28 and 256x256x56x56): Triton's autotuner keys on no constexpr unless told."""
    from fastcore_ops.kernels import blur_maxpool, blurpool

    for tuner in (blurpool._blurpool_forward_kernel, blurpool._blurpool_backward_kernel,
                  blur_maxpool._max_pool_backward_kernel, *blur_maxpool._blur_maxpool_forward.values()):
        assert "STRIDE" in tuner.keys


def test_an_unknown_autotune_setting_is_refused():
    with pytest.raises(ValueError, match="FASTCORE_OPS_AUTOTUNE='yes': use 1 to tune, 0 for"):
        backend.autotune_mode("yes")


def test_compiled_kernels_read_the_table_by_default():
    """FASTCORE_OPS_AUTOTUNE unset: every config declared (so each still compiles), the table's lookup in front."""
    script = ("from fastcore_ops.kernels import backend, blurpool\n"
              "tuner = blurpool._blurpool_forward_kernel\n"
              "assert backend.AUTOTUNE_MODE == 'table' and tuner.configs == blurpool._ROW_CONFIGS\n"
              "assert isinstance(tuner.early_config_prune.__self__, backend._TableLookup)\n"
              "print('table')")
    env = {k: v for k, v in os.environ.items()
           if k not in ("TRITON_INTERPRET", "FASTCORE_OPS_INTERPRET", "FASTCORE_OPS_AUTOTUNE")}
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert result.stdout.strip() == "table", result.stderr[-2000:]
