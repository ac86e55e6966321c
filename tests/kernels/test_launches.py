"""LaunchRecorder sorts what a call does on the host: launches, host waits, host-to-device copies, zero-fills."""

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from fastcore_ops.kernels import backend, blurpool2d
from fastcore_ops.kernels.launches import HostWaitError, LaunchRecorder

pytestmark = pytest.mark.cpu_alone  # fake CUDA tensors: nothing runs on a GPU


def _record(work):
    with FakeTensorMode():
        x = torch.empty(4, 4, device="cuda")
        with LaunchRecorder(stub_triton=True) as recorder:
            with recorder.phase("work"):
                work(x)
    return recorder.phases["work"]


def test_views_and_allocations_launch_nothing_and_arithmetic_does():
    phase = _record(lambda x: (x.t(), x.view(16), torch.empty_like(x), x + 1, x.sum()))
    assert phase.launches == ["aten::add", "aten::sum"]


def test_zero_fills_are_named_and_counted_as_launches():
    phase = _record(lambda x: (torch.zeros_like(x), x.new_zeros(3), x.fill_(0), x.fill_(1)))
    assert phase.zero_fills == ["aten::zeros_like", "aten::new_zeros", "aten::fill_"]
    assert len(phase.launches) == 4


def test_tensors_made_from_python_values_are_host_copies():
    phase = _record(lambda x: torch.tensor([1.0, 2.0], device="cuda"))
    assert phase.host_copies == ["aten::lift_fresh", "aten::_to_copy"] and phase.host_waits == []


def test_reading_a_device_value_is_a_host_wait():
    with pytest.raises(HostWaitError, match="the host would wait"):
        _record(lambda x: x.sum().item())
    assert _record(lambda x: x.to("cpu")).host_waits == ["aten::_to_copy"]


def test_a_triton_launch_through_an_autotuner_counts_once_and_is_stubbed(monkeypatch):
    monkeypatch.setattr(backend, "use_triton", lambda *tensors: True)  # the kernel's path, interpreter or not
    x = torch.randn(1, 2, 8, 8)
    with LaunchRecorder(stub_triton=True) as recorder, recorder.phase("forward"):
        y = blurpool2d(x)  # an autotuner around a jitted kernel
    assert recorder.phases["forward"].launches == ["_blurpool_forward_kernel"]
    assert y.shape == (1, 2, 4, 4)  # allocated, never written: the launch was stubbed
