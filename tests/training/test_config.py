"""TrainConfig overrides, validation, round trips and hashes."""

import dataclasses
import json
import math
import re
import types
import typing
from copy import copy as shallow_copy

import pytest

from fastcore_ops.data import ColOutOptions, ProgressiveResize, RandAugmentOptions
from fastcore_ops.surgery.blurpool import BlurPoolOptions
from fastcore_ops.surgery.stochastic_depth import StochasticDepthOptions
from fastcore_ops.training.config import (DataConfig, MethodsConfig, ModelConfig, OptimizerConfig, TextConfig,
                                          TrainConfig, config_hash, from_dict, load_config, override, to_dict, validate)
from fastcore_ops.training.methods import EMAOptions, MixUpOptions, SAMOptions, SeqLengthWarmupOptions
from fastcore_ops.training.methods.registry import all_methods
from fastcore_ops.training.recipes import get_recipe

LANGUAGE_MODEL = ["task=language_model", "model.name=gpt"]


def test_override_sets_nested_fields_of_each_type_and_leaves_the_original_alone():
    original = TrainConfig()
    changed = override(original, ["optimizer.lr=0.4", "data.flip=False", "data.crop_scale=(0.3, 1)",
                                  "model.name=cifar_resnet20", "schedule.epochs=3", "seed=7"])
    assert changed.optimizer.lr == 0.4 and changed.data.flip is False
    assert changed.data.crop_scale == (0.3, 1.0) and changed.model.name == "cifar_resnet20"
    assert changed.schedule.epochs == 3.0 and isinstance(changed.schedule.epochs, float) and changed.seed == 7
    assert original.optimizer.lr == 0.1 and original.model.name == "resnet50" and original.seed == 0


def test_override_turns_methods_on_sets_their_options_and_turns_them_off():
    original = override(TrainConfig(), ["methods.colout={}"])
    changed = override(original, [
        "methods.blurpool={}",
        "methods.stochastic_depth={'drop_rate': 0.1}",
        "methods.randaugment={'depth': 2}",  # on, with the other options at their defaults
        "methods.randaugment.severity=5",
        "methods.colout.p_row=0.1",
        "methods.progressive_resize={}",
        "methods.mixup={}",
    ])
    assert changed.methods.blurpool == BlurPoolOptions()
    assert changed.methods.stochastic_depth == StochasticDepthOptions(drop_rate=0.1)
    assert changed.methods.randaugment == RandAugmentOptions(depth=2, severity=5.0)
    assert isinstance(changed.methods.randaugment.severity, float)
    assert changed.methods.colout == ColOutOptions(p_row=0.1, p_col=0.15)
    assert changed.methods.progressive_resize == ProgressiveResize() and changed.methods.mixup == MixUpOptions()
    assert original.methods.colout == ColOutOptions() and original.methods.randaugment is None
    assert original.methods.blurpool is None
    off = override(changed, ["methods.randaugment=None", "methods.blurpool=None"])
    assert off.methods.randaugment is None and off.methods.blurpool is None


def test_the_methods_section_has_one_field_per_registered_method_each_off_by_default():
    names = [field.name for field in dataclasses.fields(MethodsConfig)]
    assert names == [method.name for method in all_methods()]
    assert all(getattr(MethodsConfig(), name) is None for name in names)


def test_override_sets_the_language_model_fields():
    config = override(TrainConfig(), [
        *LANGUAGE_MODEL, "model.options={'n_layer': 4, 'n_head': 4}",
        "text.tokenizer=bpe", "text.eval_length_multiples=[1, 2]",
        "methods.seq_length_warmup={}", "methods.seq_length_warmup.duration=0.5",
        "optimizer.name=adamw", "optimizer.betas=(0.9, 0.99)", "optimizer.grad_clip_norm=1",
    ])
    assert config.model.options == {"n_layer": 4, "n_head": 4}
    text, optimizer = config.text, config.optimizer
    assert (text.tokenizer, text.eval_length_multiples) == ("bpe", (1, 2))
    assert config.methods.seq_length_warmup == SeqLengthWarmupOptions(duration=0.5)
    assert (optimizer.name, optimizer.betas, optimizer.grad_clip_norm) == ("adamw", (0.9, 0.99), 1.0)


@pytest.mark.parametrize("assignment, message", [
    ("optimizer.lr", "expects section.field=value"),
    ("optimiser.lr=0.1", "no section 'optimiser'"),
    ("optimizer.learning_rate=0.1", "unknown field 'learning_rate'; fields here: name, lr, "),
    ("optimizer=0.1", "optimizer is a section; set its fields one by one"),
    ("optimizer.lr=fast", "not a Python literal; expected float"),
    ("optimizer.lr='0.1'", "expected float, got str"),
    ("data.flip=1", "expected bool, got int"),
    ("data.batch_size=32.5", "expected int, got float"),
    ("data.crop_scale=(0.3,)", "expected"),
    ("optimizer.lr=-1", "optimizer.lr must be a number > 0, got -1.0"),
    ("methods.bce_loss=True", "methods.bce_loss must be None (off), a BCELossOptions or a dict of its fields (), "
                              "got bool True"),
    ("methods.cutmix={}", "methods.cutmix must be None when methods.mixup is on (one batch mixing at a time)"),
    ("methods.blur={}", "unknown field 'blur'; fields here: alibi, blurpool, "),
    ("methods.stochastic_depth={'rate': 0.1}", "unknown configuration field 'methods.stochastic_depth.rate'; fields "
                                               "of methods.stochastic_depth: drop_rate, mode"),
    ("methods.ghost_batchnorm={'ghost_batch_size': '32'}",
     "methods.ghost_batchnorm: option 'ghost_batch_size' of surgery 'ghost_batchnorm' must be an int, got str '32'"),
    ("methods.ghost_batchnorm={'ghost_batch_size': 1}",
     "methods.ghost_batchnorm: ghost_batch_size must be at least 2"),
    ("model.options={'depth': 50}", "model.options must be {} for an image classifier"),
    ("methods.randaugment.depth=2", "methods.randaugment is off (None); turn it on first: --set "
                                    "methods.randaugment={} for its defaults, or a dict of its fields (depth, severity)"),
    ("methods.randaugment={'depth': -1}", "--set methods.randaugment={'depth': -1}: methods.randaugment: depth must "
                                          "be an int >= 0, got -1"),
    ("methods.randaugment={'deep': 1}", "unknown configuration field 'methods.randaugment.deep'; fields of "
                                        "methods.randaugment: depth, severity"),
    ("methods.randaugment=1", "methods.randaugment must be None (off), a RandAugmentOptions or a dict of its fields "
                              "(depth, severity), got int 1"),
    ("methods.progressive_resize={'size_increment': 5}",
     "methods.progressive_resize: methods.progressive_resize.size_increment must divide data.train_size=176, got 5"),
    ("methods.augmix={'jsd_weight': 12.0}", "methods.augmix: methods.augmix.jsd_weight > 0 (AugMix's consistency "
                                            "loss) cannot be combined with methods.mixup; set one of them off"),
    ("data.flip.x=1", "data.flip is a field, not a section"),
    ("optimizer.name=adam", "optimizer.name must be one of 'sgd', 'adamw', 'lamb', 'lars', got 'adam'"),
    ("optimizer.betas=(0.9, 1.0)", "optimizer.betas[1] must be a number in [0, 1), got 1.0"),
    ("text.eval_length_multiples=(1, 4, 2)", "text.eval_length_multiples must increase"),
    ("text.eval_batch_tokens=512", "text.eval_batch_tokens (at least one sequence of the longest evaluation "
                                   "length, 1024) must be an int >= 1024, got 512"),
    ("text.validation_every=1", "text.validation_every must be an int >= 2, got 1"),
    ("text.tokenizer=words", "text.tokenizer must be one of 'bytes', 'bpe', got 'words'"),
    ("task=translation", "task must be one of 'image_classification', 'language_model', "),
    ("compile=1", "expected bool, got int"),
])
def test_bad_overrides_name_the_field_and_what_it_accepts(assignment, message):
    mixing = "cutmix" in assignment or "augmix" in assignment
    base = override(TrainConfig(), ["methods.mixup={}"]) if mixing else TrainConfig()
    with pytest.raises(ValueError, match=re.escape(message)):
        override(base, [assignment])


def test_validation_accepts_what_apply_surgery_accepts():
    validate(override(TrainConfig(model=ModelConfig("cifar_resnet20")), [
        "methods.blurpool={}", "methods.stochastic_depth={'drop_rate': 0.2, 'mode': 'sample'}",
        "methods.ghost_batchnorm={'ghost_batch_size': 16}", "methods.channels_last={}"]))


def _full_config() -> TrainConfig:
    """A config with every kind of field set away from its default."""
    return TrainConfig(
        name="everything",
        model=ModelConfig("cifar_resnet20"),
        optimizer=OptimizerConfig(betas=(0.8, 0.9), no_decay_embeddings=True, grad_clip_norm=1.0),
        data=DataConfig(crop_scale=(0.35, 1.0)),
        methods=MethodsConfig(blurpool=BlurPoolOptions(), stochastic_depth=StochasticDepthOptions(drop_rate=0.1),
                              randaugment=RandAugmentOptions(depth=2), colout=ColOutOptions(0.1, 0.2),
                              progressive_resize=ProgressiveResize(initial_scale=0.6), sam=SAMOptions()),
        text=TextConfig(eval_length_multiples=(1, 3)),
    )


def test_saved_config_loads_back_equal_through_json_and_the_hash_follows_the_fields_not_the_name():
    config = _full_config()
    restored = from_dict(json.loads(json.dumps(to_dict(config))))
    assert restored == config and config_hash(restored) == config_hash(config)
    assert isinstance(restored.methods.randaugment, RandAugmentOptions) and restored.text.eval_length_multiples == (1, 3)
    assert restored.methods.stochastic_depth == StochasticDepthOptions(drop_rate=0.1)
    language = override(TrainConfig(), [*LANGUAGE_MODEL, "model.options={'n_layer': 2}",
                                        "methods.seq_length_warmup={}"])
    assert from_dict(json.loads(json.dumps(to_dict(language)))) == language
    renamed = override(config, ["name=other"])
    assert config_hash(renamed) == config_hash(config)
    for change in ("optimizer.lr=0.2", "methods.randaugment.depth=1", "methods.stochastic_depth=None",
                   "text.sequence_length=128", "compile=True"):
        assert config_hash(override(config, [change])) != config_hash(config), change


def test_a_method_registered_later_changes_no_stored_hash_until_it_is_turned_on():
    """Run folders, results.json and costs.json store hashes; alternating_flip was registered after them."""
    assert config_hash(TrainConfig()) == "c99bca698de7"  # the default configuration's hash before
    flipped = override(TrainConfig(), ["methods.alternating_flip={}"])
    assert config_hash(flipped) != config_hash(TrainConfig())
    assert config_hash(override(flipped, ["methods.alternating_flip=None"])) == "c99bca698de7"
    with pytest.raises(ValueError, match=re.escape("data.flip=False turns flips off; set data.flip=True or "
                                                   "methods.alternating_flip=None")):
        override(flipped, ["data.flip=False"])


def test_an_option_added_later_changes_no_stored_hash_until_it_leaves_its_default():
    """patch_whitening's eigenvalue_floor and the schedule's shape came after cifar_mild's hashes were stored."""
    mild = get_recipe("cifar_mild")
    assert config_hash(mild) == "5dd3dad415ab"  # cifar_mild's hash before the option
    for change in ("methods.patch_whitening.eigenvalue_floor=5e-4", "schedule.warmup_start_fraction=0.2",
                   "schedule.lr_decay=linear"):
        assert config_hash(override(mild, [change])) != config_hash(mild), change
    with pytest.raises(ValueError, match="schedule.lr_decay must be one of"):
        override(mild, ["schedule.lr_decay=step"])


def test_tta_options_added_later_change_no_stored_hash_until_they_leave_their_defaults():
    """TTA's shifts, fill, shifted_weight and average came after runs judged with TTA stored their hashes."""
    judged = override(get_recipe("cifar_mild"), ["methods.tta={'translate': 1}"])
    assert config_hash(judged) == "450a9d82b260"  # its hash before the options
    for change in ("methods.tta.shifts=diagonals", "methods.tta.fill=reflect", "methods.tta.shifted_weight=0.5",
                   "methods.tta.average=logits"):
        assert config_hash(override(judged, [change])) != config_hash(judged), change


def test_a_run_folder_of_the_layout_before_the_method_registry_is_refused_with_its_reason():
    values = to_dict(TrainConfig())
    values["model"]["surgeries"] = ["blurpool"]
    with pytest.raises(ValueError, match=re.escape("written before methods had a registry")):
        from_dict(values)


def test_whole_numbers_in_float_fields_hash_as_floats():
    """RandAugmentOptions' severity defaults to the int 9: the config holds 9.0, as JSON gives it back."""
    config = TrainConfig(methods=MethodsConfig(randaugment=RandAugmentOptions()), optimizer=OptimizerConfig(lr=1))
    assert isinstance(config.methods.randaugment.severity, float) and isinstance(config.optimizer.lr, float)
    assert config_hash(from_dict(json.loads(json.dumps(to_dict(config))))) == config_hash(config)


@pytest.mark.parametrize("values, message", [
    ({"colour": 1}, "unknown configuration field 'colour'"),
    ({"methods": {"randaugment": {"depth": 1, "colour": 1}}},
     "unknown configuration field 'methods.randaugment.colour'"),
    ({"model": {"blurpool": True}}, "unknown configuration field 'model.blurpool'; fields of model: name, options"),
    ({"data": {"randaugment_depth": 1}}, "unknown configuration field 'data.randaugment_depth'"),
])
def test_from_dict_refuses_unknown_fields_at_every_level(values, message):
    saved = to_dict(TrainConfig())
    for section, fields in values.items():
        saved[section] = {**saved[section], **fields} if isinstance(fields, dict) else fields
    with pytest.raises(ValueError, match=re.escape(message)):
        from_dict(saved)


@pytest.mark.parametrize("assignments, message", [
    (["methods.mixup={}"], "methods.mixup applies to task 'image_classification' only, and 'language_model' is not "
                           "one (this run's task); set methods.mixup=None"),
    (["methods.cutmix={}"], "methods.cutmix applies to task 'image_classification' only"),
    (["methods.randaugment={}"], "methods.randaugment applies to task 'image_classification' only"),
    (["methods.colout={}"], "set methods.colout=None"),
    (["methods.blurpool={}"], "methods.blurpool applies to task 'image_classification' only"),
    (["methods.bce_loss={}"], "methods.bce_loss applies to task 'image_classification' only"),
    (["methods.label_smoothing={}"], "methods.label_smoothing applies to task 'image_classification' only"),
    (["model.name=resnet50"], "model.name must be one of gpt, hf_gpt2 for task 'language_model', got 'resnet50'"),
    (["methods.seq_length_warmup={'start_length': 512}"],
     "methods.seq_length_warmup: methods.seq_length_warmup.start_length must be <= text.sequence_length=256, "
     "got 512"),
])
def test_language_models_refuse_what_only_images_use(assignments, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        override(TrainConfig(), [*LANGUAGE_MODEL, *assignments])


def test_language_models_allow_the_methods_any_model_takes():
    config = override(TrainConfig(), [*LANGUAGE_MODEL, "model.name=hf_gpt2", "methods.sam={}", "methods.swa={}",
                                      "methods.ema={'half_life_steps': 10}", "methods.low_precision_norm={}",
                                      "methods.alibi={'max_sequence_length': 1024}"])
    assert config.methods.alibi.max_sequence_length == 1024 and config.methods.ema == EMAOptions(half_life_steps=10)


def test_images_refuse_sequence_length_warmup():
    with pytest.raises(ValueError, match=re.escape("methods.seq_length_warmup applies to task 'language_model' only, and "
                                                   "'image_classification' is not one (this run's task); set "
                                                   "methods.seq_length_warmup=None")):
        override(TrainConfig(), ["methods.seq_length_warmup={}"])


@pytest.mark.parametrize("optimizer, message", [
    (OptimizerConfig(name="adamw", nesterov=True), "optimizer.nesterov must be False with optimizer.name='adamw'"),
    (OptimizerConfig(eps=0.0), "optimizer.eps must be a number > 0, got 0.0"),
    (OptimizerConfig(grad_clip_norm=-1.0), "optimizer.grad_clip_norm (0 = off) must be a number >= 0, got -1.0"),
])
def test_optimizer_settings_that_cannot_work_are_refused(optimizer, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        validate(TrainConfig(optimizer=optimizer))


def test_adamw_takes_the_sgd_only_defaults_without_complaint():
    validate(TrainConfig(optimizer=OptimizerConfig(name="adamw", momentum=0.9, decoupled_weight_decay=False)))


@pytest.mark.parametrize("options, error, message", [
    ({"start_length": 0}, ValueError, "start_length must be an int >= 1, got 0"),
    ({"start_length": 12}, ValueError, "start_length must be a multiple of multiple_of=8, got 12"),
    ({"duration": 1.5}, ValueError, "duration must be a number in (0, 1], got 1.5"),
    ({"keep_tokens": 1}, TypeError, "keep_tokens must be a bool, got int 1"),
])
def test_sequence_length_warmup_options_check_themselves(options, error, message):
    with pytest.raises(error, match=re.escape(message)):
        SeqLengthWarmupOptions(**options)


@pytest.mark.parametrize("options", [{"sizes": (1, 2)}, {"initializer_range": math.inf},
                                     {"layer_norm_epsilon": [math.nan]}], ids=["a-tuple", "inf", "nan-in-a-list"])
def test_model_options_must_survive_json(options):
    config = dataclasses.replace(override(TrainConfig(), LANGUAGE_MODEL), model=ModelConfig("gpt", options))
    with pytest.raises(ValueError, match=re.escape("model.options must hold JSON values")):
        validate(config)


def test_configs_share_no_lists_or_dicts_with_their_sources():
    options = {"n_layer": [2]}
    config = override(TrainConfig(), LANGUAGE_MODEL)
    config = dataclasses.replace(config, model=ModelConfig("gpt", options=options))
    copy = override(config, [])
    copy.model.options["n_layer"].append(3)
    assert config.model.options == options == {"n_layer": [2]}


NON_FINITE = [math.inf, -math.inf, math.nan]


def _float_fields(kind, path=()) -> list[tuple]:
    """The path (field names, then an index for a tuple's item) of each float the dataclass ``kind`` declares.

    Read from the declared types, not from values, so that a field the validation's walk missed is listed.
    """
    found = []
    for name, field_kind in typing.get_type_hints(kind).items():
        if typing.get_origin(field_kind) is typing.ClassVar:
            continue
        if typing.get_origin(field_kind) in (typing.Union, types.UnionType):  # X | None
            field_kind = next(arg for arg in typing.get_args(field_kind) if arg is not type(None))
        items = typing.get_args(field_kind)
        if field_kind is float:
            found.append((*path, name))
        elif dataclasses.is_dataclass(field_kind):
            found += _float_fields(field_kind, (*path, name))
        elif typing.get_origin(field_kind) is tuple and float in items:
            length = len(getattr(kind(), name)) if Ellipsis in items else len(items)
            found += [(*path, name, index) for index in range(length)]
    return found


def _with_value(target, path: tuple, value):
    """A copy of the dataclass ``target`` with the value at ``path`` replaced, made without any check of its own."""
    name, rest = path[0], path[1:]
    current = getattr(target, name)
    if rest and isinstance(rest[0], int):
        new = tuple(value if index == rest[0] else item for index, item in enumerate(current))
    else:
        new = _with_value(current, rest, value) if rest else value
    changed = shallow_copy(target)
    object.__setattr__(changed, name, new)  # the options dataclasses may be frozen
    return changed


def _dotted(path: tuple) -> str:
    index = f"[{path[-1]}]" if isinstance(path[-1], int) else ""
    return ".".join(part for part in path if isinstance(part, str)) + index


FLOAT_FIELDS = _float_fields(TrainConfig)


def test_the_float_fields_of_every_section_and_method_are_found():
    dotted = {_dotted(path) for path in FLOAT_FIELDS}
    assert {"optimizer.lr", "optimizer.betas[1]", "schedule.epochs", "data.crop_scale[0]", "methods.sam.rho",
            "methods.swa.lr", "methods.selective_backprop.scale_factor"} <= dotted
    assert len(dotted) >= 40


@pytest.mark.parametrize("value", NON_FINITE, ids=["inf", "-inf", "nan"])
def test_every_float_field_refuses_inf_and_nan_in_validate_and_from_json(value):
    """validate() names each float field holding ``value``, and a config.json holding it is refused."""
    config = TrainConfig(methods=MethodsConfig(**{method.name: method.options() for method in all_methods()}))
    wrong, wrong_from_json = {}, {}
    for path in FLOAT_FIELDS:
        bad = _with_value(config, path, value)
        try:
            validate(bad)
            wrong[_dotted(path)] = "accepted"
        except ValueError as error:
            if f"{_dotted(path)} must be a finite number, got {value!r}" not in str(error):
                wrong[_dotted(path)] = str(error)
        # Built from JSON, a method's options refuse a value outside their range themselves, naming the method.
        names = (_dotted(path), f"{_dotted(path[:-1])}: {path[-1]} must be")
        try:
            from_dict(json.loads(json.dumps(to_dict(bad))))
            wrong_from_json[_dotted(path)] = "accepted"
        except ValueError as error:
            if not any(name in str(error) for name in names):
                wrong_from_json[_dotted(path)] = str(error)
    assert not wrong, f"validate() did not refuse {value!r}, naming the field: {wrong}"
    assert not wrong_from_json, f"a config.json with {value!r} was not refused naming the field: {wrong_from_json}"


@pytest.mark.parametrize("assignment", ["optimizer.lr=1e999", "schedule.epochs=1e999",
                                        "optimizer.betas=(0.9, -1e999)", "methods.sam={'rho': 1e999}"])
def test_a_set_value_that_overflows_to_inf_is_refused(assignment):
    with pytest.raises(ValueError, match=r"must be a finite number, got -?inf \(a number past 1.8e308, such as 1e999"):
        override(TrainConfig(), [assignment])


def test_a_config_file_with_a_whole_number_no_float_holds_is_refused_naming_the_field(tmp_path):
    values = to_dict(TrainConfig())
    values["schedule"]["epochs"] = 10**400
    path = tmp_path / "config.json"
    path.write_text(json.dumps(values))
    with pytest.raises(ValueError, match=r"config.json is not usable: schedule.epochs must be a number a float "
                                         r"holds, got a whole number of 401 digits"):
        load_config(path)
