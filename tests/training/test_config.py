"""TrainConfig overrides, validation, round trips and hashes."""

import pytest

from training.config import TrainConfig, config_hash, from_dict, override, to_dict


def test_override_sets_nested_fields_of_each_type_and_leaves_the_original_alone():
    original = TrainConfig()
    changed = override(original, ["optimizer.lr=0.4", "model.blurpool=True", "data.crop_scale=(0.3, 1)",
                                  "model.name=cifar_resnet20", "schedule.epochs=3", "seed=7"])
    assert changed.optimizer.lr == 0.4 and changed.model.blurpool is True
    assert changed.data.crop_scale == (0.3, 1.0) and changed.model.name == "cifar_resnet20"
    assert changed.schedule.epochs == 3.0 and isinstance(changed.schedule.epochs, float) and changed.seed == 7
    assert original.optimizer.lr == 0.1 and original.model.name == "resnet50" and original.seed == 0


@pytest.mark.parametrize("assignment, message", [
    ("optimizer.lr", "expects section.field=value"),
    ("optimiser.lr=0.1", "no section 'optimiser'"),
    ("optimizer.learning_rate=0.1", "unknown field 'learning_rate'; fields here: lr, "),
    ("optimizer.lr=fast", "not a Python literal; expected float"),
    ("optimizer.lr='0.1'", "expected float, got str"),
    ("model.blurpool=1", "expected bool, got int"),
    ("data.batch_size=32.5", "expected int, got float"),
    ("data.crop_scale=(0.3,)", "expected"),
    ("optimizer.lr=-1", "optimizer.lr must be a number > 0, got -1.0"),
    ("methods.loss='mse'", "methods.loss must be one of"),
    ("methods.cutmix_alpha=1.0", "0 when mixup_alpha is set"),
])
def test_bad_overrides_name_the_field_and_what_it_accepts(assignment, message):
    base = override(TrainConfig(), ["methods.mixup_alpha=0.2"]) if "cutmix" in assignment else TrainConfig()
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        override(base, [assignment])


def test_saved_config_loads_back_equal_and_the_hash_follows_the_fields_not_the_name():
    config = override(TrainConfig(), ["data.crop_scale=(0.35, 1.0)", "methods.sam_rho=0.05"])
    assert from_dict(to_dict(config)) == config
    renamed = override(config, ["name=other"])
    assert config_hash(renamed) == config_hash(config)
    assert config_hash(override(config, ["optimizer.lr=0.2"])) != config_hash(config)
    with pytest.raises(ValueError, match="unknown configuration field 'colour'"):
        from_dict({**to_dict(config), "colour": 1})
