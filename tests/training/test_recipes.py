"""The recipes: all load and validate, copies are independent, and they carry their sources' numbers."""

import dataclasses

import pytest

from training.assemble import effective_lr
from training.config import from_dict, override, to_dict, validate
from training.models import model_names
from training.recipes import get_recipe, list_recipes

RESNET50 = ["resnet50_baseline", "resnet50_mild", "resnet50_medium", "resnet50_hot"]
CIFAR = ["cifar_baseline", "cifar_mild", "cifar_medium", "cifar_hot"]
MOSAIC = RESNET50[1:]


def test_list_recipes_finds_every_recipe_module():
    assert list_recipes() == sorted(RESNET50 + CIFAR)


@pytest.mark.parametrize("name", RESNET50 + CIFAR)
def test_recipe_loads_validates_and_round_trips(name):
    config = get_recipe(name)
    validate(config)
    assert config.name == name
    assert config.model.name in model_names()
    assert from_dict(to_dict(config)) == config


def test_get_recipe_returns_independent_copies():
    first = get_recipe("cifar_hot")
    first.optimizer.lr = 9.0
    first.data.crop_scale = (0.5, 1.0)
    second = get_recipe("cifar_hot")
    assert second.optimizer.lr == 0.4 and second.data.crop_scale == (0.35, 1.0)
    assert second is not first and second.methods is not first.methods


def test_override_leaves_the_recipe_unchanged():
    changed = override(get_recipe("resnet50_mild"), ["optimizer.lr=0.256", "data.batch_size=32"])
    assert changed.optimizer.lr == 0.256
    assert get_recipe("resnet50_mild").optimizer.lr == 2.048


def test_unknown_recipe_names_the_choices():
    with pytest.raises(ValueError, match=r"cifar_baseline.*resnet50_mild.*got 'resnet50_spicy'"):
        get_recipe("resnet50_spicy")


# Table 1 of "Mosaic ResNet Deep Dive", columns NVIDIA Hparams Baseline and MosaicML Mild/Medium/Hot.
@pytest.mark.parametrize("name", RESNET50)
def test_resnet50_recipes_share_the_table_optimizer(name):
    config = get_recipe(name)
    assert config.model.name == "resnet50"
    # LR 2.048 is for the global batch of 2048: 256 per process on 8 processes.
    assert (config.optimizer.lr, config.optimizer.reference_batch, config.data.batch_size) == (2.048, 2048, 256)
    assert config.optimizer.momentum == 0.875
    assert config.optimizer.weight_decay == 5e-4  # 5e-5 in that row is NVIDIA's MLPerf column
    assert config.optimizer.decoupled_weight_decay
    assert config.schedule.warmup_epochs == 8
    assert config.precision == "amp"
    assert config.data.eval_size == 224


def test_resnet50_baseline_uses_no_speedup_method():
    config = get_recipe("resnet50_baseline")
    assert (config.data.train_size, config.data.eval_resize) == (224, 256)
    assert (config.methods.loss, config.methods.label_smoothing) == ("ce", 0.1)
    assert not (config.model.blurpool or config.model.channels_last or config.data.progressive_resize)
    assert config.methods.ema_half_life_steps == config.methods.mixup_alpha == config.methods.sam_rho == 0


TABLE_1 = {
    # name: label smoothing, MixUp, SAM rho, SAM interval, RandAugment depth, stochastic depth, ColOut,
    #       initial scale, delay fraction, finetune fraction
    "resnet50_mild": (0.08, 0.0, 0.0, 1, 0, 0.0, 0.0, 0.5, 0.4, 0.2),
    "resnet50_medium": (0.1, 0.2, 0.5, 10, 0, 0.0, 0.0, 0.5, 0.4, 0.2),
    "resnet50_hot": (0.13, 0.25, 0.5, 5, 1, 0.1, 0.05, 0.6, 0.2, 0.2),
}


@pytest.mark.parametrize("name", MOSAIC)
def test_mosaic_recipes_carry_table_1(name):
    config = get_recipe(name)
    m, d = config.methods, config.data
    got = (m.label_smoothing, m.mixup_alpha, m.sam_rho, m.sam_interval, d.randaugment_depth,
           config.model.stochastic_depth, d.colout, d.resize_initial_scale, d.resize_delay_fraction,
           d.resize_finetune_fraction)
    assert got == TABLE_1[name]
    assert (d.train_size, d.eval_resize) == (176, 232)
    assert m.loss == "bce" and d.progressive_resize and m.ema_half_life_steps > 0
    assert config.model.blurpool and config.model.channels_last


def test_mosaic_recipe_durations_sit_in_their_regimes():
    epochs = {name: get_recipe(name).schedule.epochs for name in MOSAIC}
    assert epochs["resnet50_mild"] < 60 <= epochs["resnet50_medium"] <= 240 <= epochs["resnet50_hot"]


@pytest.mark.parametrize("name", CIFAR)
def test_cifar_recipes_fit_cifar_on_a_cpu(name):
    config = get_recipe(name)
    assert config.model.name == "cifar_resnet20"
    assert config.data.train_size == config.data.eval_size == config.data.eval_resize == 32
    assert config.data.crop_scale == (0.35, 1.0) and config.data.num_workers == -1
    assert config.precision == "fp32"


def test_cifar_baseline_is_plain_sgd():
    config = get_recipe("cifar_baseline")
    assert dataclasses.astuple(config.optimizer) == (0.8, 128, 0.9, True, 5e-4, False, False)
    assert (config.data.batch_size, config.methods.loss) == (128, "ce")
    assert not (config.model.blurpool or config.model.channels_last or config.data.progressive_resize)
    assert config.methods == type(config.methods)(loss="ce")  # no method switched on


def test_cifar_recipes_add_methods_in_the_mosaic_order():
    mild, medium, hot = (get_recipe(n) for n in CIFAR[1:])
    baseline = get_recipe("cifar_baseline")
    assert mild.schedule.epochs < baseline.schedule.epochs == medium.schedule.epochs < hot.schedule.epochs
    assert (mild.methods.loss, mild.methods.label_smoothing, mild.methods.mixup_alpha) == ("bce", 0.08, 0.0)
    assert mild.model.blurpool and mild.model.channels_last and mild.methods.ema_half_life_steps > 0
    assert mild.optimizer == medium.optimizer == hot.optimizer == dataclasses.replace(baseline.optimizer, lr=0.4)
    assert (mild.data.progressive_resize, mild.data.resize_initial_scale, mild.data.resize_size_increment) == (
        True, 0.5, 4)
    assert (medium.methods.mixup_alpha, medium.methods.sam_rho, medium.methods.sam_interval) == (0.2, 0.05, 10)
    assert (hot.data.randaugment_depth, hot.model.stochastic_depth, hot.data.colout) == (1, 0.05, 0.05)
    assert (hot.methods.sam_rho, hot.methods.sam_interval) == (0.05, 5)


# The LR each recipe trains at on one process of its default batch: the CIFAR recipes' own LR
# (their reference is that batch), the ResNet-50 recipes' 2.048 scaled from 8 x 256 to 1 x 256.
ONE_PROCESS_LR = {"cifar_baseline": 0.8, "cifar_mild": 0.4, "cifar_medium": 0.4, "cifar_hot": 0.4,
                  **dict.fromkeys(RESNET50, 0.256)}


@pytest.mark.parametrize("name", RESNET50 + CIFAR)
def test_the_lr_follows_the_global_batch(name):
    config = get_recipe(name)
    assert effective_lr(config, world_size=1) == ONE_PROCESS_LR[name]
    assert effective_lr(config, world_size=2) == 2 * ONE_PROCESS_LR[name]
    reference_processes = config.optimizer.reference_batch // config.data.batch_size
    assert effective_lr(config, world_size=reference_processes) == config.optimizer.lr
    # Half the batch per process on twice the processes: the same global batch, the same LR.
    halved = override(config, [f"data.batch_size={config.data.batch_size // 2}"])
    assert effective_lr(halved, world_size=2) == ONE_PROCESS_LR[name]


def test_an_lr_override_is_the_lr_at_the_reference_batch_and_is_scaled_too():
    config = override(get_recipe("resnet50_mild"), ["optimizer.lr=4.096"])
    assert effective_lr(config, world_size=1) == 0.512 and effective_lr(config, world_size=8) == 4.096


@pytest.mark.parametrize("value", [0, -256])
def test_a_reference_batch_below_one_is_refused(value):
    with pytest.raises(ValueError, match=rf"optimizer\.reference_batch must be .*>= 1, got {value}"):
        override(get_recipe("cifar_mild"), [f"optimizer.reference_batch={value}"])
