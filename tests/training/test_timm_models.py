"""timm's models by name in the trainer: model.name=timm:<name>."""

import argparse
import sys

import pytest
import torch

from fastcore_ops.training.config import TrainConfig, override, validate
from fastcore_ops.training.models import build_model, is_known_model
from fastcore_ops.training.request import check_arguments

timm = pytest.importorskip("timm", reason="timm is the optional 'optim' extra (make installs it)")


def test_a_timm_name_builds_timms_model_with_the_classes_asked_for():
    torch.manual_seed(0)
    model = build_model("timm:resnet18", num_classes=7)
    assert type(model) is timm.models.resnet.ResNet and model.fc.out_features == 7
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 7)
    validate(override(TrainConfig(), ["model.name=timm:resnet18"]))
    check_arguments(argparse.Namespace(imports=[], recipe=None, model="timm:resnet18", tensorboard=False))
    assert is_known_model("timm:resnet18") and not is_known_model("timm:resnet5O")


def test_a_name_timm_lacks_is_refused_with_the_closest_names():
    with pytest.raises(ValueError, match=r"model.name 'timm:resnet5O': timm has no model 'resnet5O'; did you mean "
                                         r"timm:resnet50"):
        validate(override(TrainConfig(), ["model.name=timm:resnet5O"]))
    with pytest.raises(ValueError, match="timm has no model 'no_such_net'; timm.list_models.. lists its models"):
        build_model("timm:no_such_net", num_classes=10)
    with pytest.raises(ValueError, match="or timm:<a timm model>, got 'resnet5O'"):
        build_model("resnet5O", num_classes=10)


def test_a_timm_name_without_timm_installed_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "timm", None)  # import timm now raises ImportError
    with pytest.raises(ValueError, match=r"'timm:resnet18' is a timm model, and timm is not installed; install it "
                                         r"with pip install timm"):
        validate(override(TrainConfig(), ["model.name=timm:resnet18"]))
    assert not is_known_model("timm:resnet18")
