"""compile=True: the training step runs through torch.compile, custom ops included, with its compile time apart."""

import logging

import pytest
import torch

from fastcore_ops.training.assemble import build_trainer
from fastcore_ops.training.config import override
from fastcore_ops.training.models import IMAGE_CLASSIFIER, cifar_resnet, registry
from fastcore_ops.training.recipes import get_recipe


def _resnet8(num_classes: int = 10, **kwargs):
    """ResNet-8: one block a stage, so that Inductor compiles a third of ResNet-20's graph."""
    return cifar_resnet(8, num_classes, **kwargs)


@pytest.fixture(autouse=True)
def resnet8(monkeypatch):
    """ResNet-8 registered for this module's tests only: the registry is left as it was."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    registry.register_model(IMAGE_CLASSIFIER, "compile_test_resnet8")(_resnet8)


# cifar_mild's BlurPool and BCE custom ops at one input size (no progressive resizing: one compilation).
# Tiny images, so that the interpreted Triton kernels take little time (at 16 px, 30 s a run).
SETTINGS = ["data.batch_size=10", "schedule.epochs=1", "methods.progressive_resize=None", "methods.ema=None",
            "precision=fp32", "data.train_size=8", "data.eval_size=8", "data.eval_resize=8",
            "model.name=compile_test_resnet8"]


@pytest.fixture(autouse=True)
def quiet_compile_trace(monkeypatch):
    """Keep torch.compile's structured trace out of pytest's log capture, which would make it record (slowly)."""
    monkeypatch.setattr(logging.getLogger("torch.__trace"), "propagate", False)


def _fit(data, compile: bool):
    config = override(get_recipe("cifar_mild"), [*SETTINGS, f"compile={compile}"])
    trainer = build_trainer(config, data=data, out=None, device=torch.device("cpu"), progress=False)
    result = trainer.fit()
    return trainer, result


def test_a_compiled_run_trains_like_an_eager_one_and_reports_its_compile_time_apart(micro_cifar):
    eager, eager_result = _fit(micro_cifar, compile=False)
    compiled, compiled_result = _fit(micro_cifar, compile=True)
    assert isinstance(compiled.forward_module, torch._dynamo.eval_frame.OptimizedModule)
    assert compiled_result.steps == eager_result.steps == 2
    assert eager_result.compile_seconds == 0.0
    assert compiled_result.compile_seconds > 0.0  # short with inductor's cache warm from an earlier run
    for trained, reference in zip(compiled.model.state_dict().values(), eager.model.state_dict().values()):
        torch.testing.assert_close(trained, reference, rtol=1e-3, atol=1e-4)
