"""fastcore_ops.training.models' registry: each model registered where it is defined, in one family, once."""

import pytest

from fastcore_ops.training.config import TrainConfig, override, validate
from fastcore_ops.training.models import build_model, model_names
from fastcore_ops.training.models.language import build_language_model
from fastcore_ops.training.models.registry import CAUSAL_LM, IMAGE_CLASSIFIER, get, names, register_model


def test_each_model_is_found_in_its_own_family_only():
    assert names(CAUSAL_LM) == ["gpt", "hf_gpt2"]
    assert {"cifar_resnet20", "cifar_resnet56"} <= set(names(IMAGE_CLASSIFIER)) <= set(model_names())
    with pytest.raises(ValueError, match="model.name must be one of gpt, hf_gpt2 for a language model"):
        build_language_model("cifar_resnet20", vocab_size=256, sequence_length=8, options={})
    with pytest.raises(ValueError, match="got 'gpt'"):
        build_model("gpt", num_classes=10)
    with pytest.raises(ValueError, match="model.name must be one of gpt, hf_gpt2 for task 'language_model'"):
        validate(override(TrainConfig(task="language_model"), ["model.name=cifar_resnet20"]))


def test_a_second_model_under_a_taken_name_is_refused():
    with pytest.raises(ValueError, match="model 'gpt' is registered twice"):
        register_model(CAUSAL_LM, "gpt")(lambda **_: None)
    assert get("gpt").build.__module__ == "fastcore_ops.training.models.language"
    with pytest.raises(ValueError, match="family must name the arguments its builders take"):
        register_model("image classifier")
