import pytest
import torch
import torchvision

from fastcore_ops.kernels import backend
from fastcore_ops.surgery import core

CNN_MODELS = [
    "resnet18", "resnet50", "wide_resnet50_2", "resnext50_32x4d", "mobilenet_v2",
    "mobilenet_v3_large", "vgg16_bn", "efficientnet_b0", "regnet_y_400mf",
]


@pytest.fixture
def reference_kernels(monkeypatch):
    """Run the kernels' PyTorch references on the CPU: these tests are about the surgery, and
    the kernels are tested against their references through the interpreter elsewhere."""
    monkeypatch.setattr(backend, "INTERPRETING", False)


@pytest.fixture
def failing_surgery(monkeypatch) -> str:
    """The name of a surgery, registered for the test, whose plan raises RuntimeError("planned failure")."""

    def failing_plan(model, options):
        raise RuntimeError("planned failure")

    broken = core.Surgery("broken", "fails", core._REGISTRY["channels_last"].options, failing_plan, order=1,
                          inputs="images")
    monkeypatch.setitem(core._REGISTRY, "broken", broken)
    return "broken"


def build(name: str, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return getattr(torchvision.models, name)(num_classes=10)


def images(batch: int = 4, size: int = 32, seed: int = 0) -> torch.Tensor:
    return torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(seed))
