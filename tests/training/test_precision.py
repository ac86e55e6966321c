"""Every place that picks a precision asks fastcore_ops.training.precision, which says what it chose and why."""

import pytest
import torch

from fastcore_ops.training import precision as precision_module
from fastcore_ops.training.precision import choose_precision

CPU, CUDA = torch.device("cpu"), torch.device("cuda")


@pytest.fixture(params=[(), ("amx_bf16",), ("avx512_bf16",)], ids=["no-bf16-units", "amx", "avx512-bf16"])
def cpu_units(request, monkeypatch):
    """Pretend to be a CPU with these bf16 units, whatever this one has."""
    monkeypatch.setattr(precision_module, "cpu_bf16_units", lambda: request.param)
    return request.param


def test_amp_is_bf16_only_on_a_cpu_with_bf16_units_and_says_so(cpu_units):
    choice = choose_precision("amp", CPU)
    if cpu_units:
        assert choice.dtype == torch.bfloat16
        assert cpu_units[0] in choice.describe()
    else:
        assert choice.dtype is None
        assert "without bf16 units" in choice.describe()
    assert choice.describe().startswith(f"precision: {choice.name} (precision=amp")


def test_bf16_by_name_is_kept_but_warned_about_where_the_cpu_emulates_it(cpu_units, recwarn):
    choice = choose_precision("amp_bf16", CPU)
    assert choice.dtype == torch.bfloat16
    warned = [str(w.message) for w in recwarn.list if "emulates bf16" in str(w.message)]
    assert len(warned) == (0 if cpu_units else 1)


@pytest.mark.parametrize("name, device, dtype", [
    ("fp32", CPU, None), ("fp32", CUDA, None), ("amp", CUDA, torch.float16), ("amp_fp16", CPU, torch.float16),
    ("amp_bf16", CUDA, torch.bfloat16)])
def test_the_other_choices_do_not_depend_on_the_cpu(name, device, dtype, cpu_units):
    assert choose_precision(name, device).dtype == dtype


def test_an_unknown_precision_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="amp_bf16"):
        choose_precision("bf16", CPU)


def test_fp32_runs_without_autocast_and_bf16_under_it():
    x = torch.ones(2, 2)
    with choose_precision("fp32", CPU).autocast(CPU):
        assert (x @ x).dtype == torch.float32
    with choose_precision("amp_bf16", CPU).autocast(CPU):
        assert (x @ x).dtype == torch.bfloat16
