"""TrainConfig overrides, validation, round trips and hashes."""

import dataclasses
import json
import re

import pytest

from fastcore_ops.data import ColOutOptions, ProgressiveResize, RandAugmentOptions
from training.config import (DataConfig, MethodsConfig, ModelConfig, OptimizerConfig, SeqLengthWarmupOptions,
                             TextConfig, TrainConfig, config_hash, from_dict, override, to_dict, validate)

LANGUAGE_MODEL = ["task=language_model", "model.name=gpt"]


def test_override_sets_nested_fields_of_each_type_and_leaves_the_original_alone():
    original = TrainConfig()
    changed = override(original, ["optimizer.lr=0.4", "data.flip=False", "data.crop_scale=(0.3, 1)",
                                  "model.name=cifar_resnet20", "schedule.epochs=3", "seed=7"])
    assert changed.optimizer.lr == 0.4 and changed.data.flip is False
    assert changed.data.crop_scale == (0.3, 1.0) and changed.model.name == "cifar_resnet20"
    assert changed.schedule.epochs == 3.0 and isinstance(changed.schedule.epochs, float) and changed.seed == 7
    assert original.optimizer.lr == 0.1 and original.model.name == "resnet50" and original.seed == 0


def test_override_sets_lists_dicts_and_option_groups():
    original = override(TrainConfig(), ["data.colout={}"])
    changed = override(original, [
        "model.surgeries=['blurpool', ['stochastic_depth', {'drop_rate': 0.1}]]",
        "data.randaugment={'depth': 2}",  # on, with the other fields at their defaults
        "data.randaugment.severity=5",
        "data.colout.p_row=0.1",
        "data.progressive_resize={}",
    ])
    assert changed.model.surgeries == ["blurpool", ("stochastic_depth", {"drop_rate": 0.1})]
    assert changed.data.randaugment == RandAugmentOptions(depth=2, severity=5.0)
    assert isinstance(changed.data.randaugment.severity, float)
    assert changed.data.colout == ColOutOptions(p_row=0.1, p_col=0.15)
    assert changed.data.progressive_resize == ProgressiveResize()
    assert original.data.colout == ColOutOptions() and original.data.randaugment is None
    assert original.model.surgeries == []
    off = override(changed, ["data.randaugment=None", "model.surgeries=[]"])
    assert off.data.randaugment is None and off.model.surgeries == []


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
    ("methods.loss='mse'", "methods.loss must be one of"),
    ("methods.cutmix_alpha=1.0", "0 when mixup_alpha is set"),
    ("model.surgeries=blurpool", "not a Python literal; expected list"),
    ("model.surgeries=['blurpool', 'blurpool']", "model.surgeries[1]: surgery 'blurpool' is listed twice"),
    ("model.surgeries=['blur']", "model.surgeries[0]: unknown surgery 'blur'; choose from: alibi, blurpool, "),
    ("model.surgeries=[5]", "model.surgeries[0] must be a surgery name or a [name, {option: value}] pair, got 5"),
    ("model.surgeries=[('stochastic_depth', {'rate': 0.1})]",
     "model.surgeries[0] ('stochastic_depth', {'rate': 0.1}): surgery 'stochastic_depth' has no option 'rate'; "
     "its options are: drop_rate, mode"),
    ("model.surgeries=[('ghost_batchnorm', {'ghost_batch_size': '32'})]",
     "option 'ghost_batch_size' of surgery 'ghost_batchnorm' must be an int, got str '32'"),
    ("model.options={'depth': 50}", "model.options must be {} for an image classifier"),
    ("data.randaugment.depth=2", "data.randaugment is off (None); turn it on first: --set data.randaugment={} for "
                                 "its defaults, or a dict of its fields (depth, severity)"),
    ("data.randaugment={'depth': -1}", "--set data.randaugment={'depth': -1}: data.randaugment: depth must be an "
                                       "int >= 0, got -1"),
    ("data.randaugment={'deep': 1}", "unknown configuration field 'data.randaugment.deep'; fields of "
                                     "data.randaugment: depth, severity"),
    ("data.randaugment=1", "data.randaugment must be None (off), a RandAugmentOptions or a dict of its fields "
                           "(depth, severity), got int 1"),
    ("data.progressive_resize={'size_increment': 5}",
     "data.progressive_resize.size_increment must divide data.train_size=176, got 5"),
    ("data.flip.x=1", "data.flip is a field, not a section"),
    ("optimizer.name=adam", "optimizer.name must be one of 'sgd', 'adamw', 'lamb', 'lars', got 'adam'"),
    ("optimizer.betas=(0.9, 1.0)", "optimizer.betas[1] must be a number in [0, 1), got 1.0"),
    ("text.eval_length_multiples=(1, 4, 2)", "text.eval_length_multiples must increase"),
    ("text.eval_batch_tokens=512", "text.eval_batch_tokens (at least one sequence of the longest evaluation "
                                   "length, 1024) must be an int >= 1024, got 512"),
    ("text.validation_every=1", "text.validation_every must be an int >= 2, got 1"),
    ("text.tokenizer=words", "text.tokenizer must be one of 'bytes', 'bpe', got 'words'"),
    ("task=translation", "task must be one of 'image_classification', 'language_model', got 'translation'"),
    ("compile=1", "expected bool, got int"),
])
def test_bad_overrides_name_the_field_and_what_it_accepts(assignment, message):
    base = override(TrainConfig(), ["methods.mixup_alpha=0.2"]) if "cutmix" in assignment else TrainConfig()
    with pytest.raises(ValueError, match=re.escape(message)):
        override(base, [assignment])


def test_surgery_pairs_take_one_form_however_written():
    spellings = [
        ["blurpool", ("stochastic_depth", {"drop_rate": 0.1})],
        [["blurpool", {}], ["stochastic_depth", {"drop_rate": 0.1}]],  # as JSON gives them back
        (("blurpool", {}), ("stochastic_depth", {"drop_rate": 0.1})),
    ]
    configs = [TrainConfig(model=ModelConfig(surgeries=surgeries)) for surgeries in spellings]
    assert all(config == configs[0] for config in configs)
    assert configs[0].model.surgeries == ["blurpool", ("stochastic_depth", {"drop_rate": 0.1})]
    assert len({config_hash(config) for config in configs}) == 1
    given = {"drop_rate": 0.1}
    model = ModelConfig(surgeries=[("stochastic_depth", given)])
    given["drop_rate"] = 0.5  # the config holds its own copy of the options
    assert model.surgeries == [("stochastic_depth", {"drop_rate": 0.1})]


def test_has_surgery_finds_names_with_and_without_options():
    model = ModelConfig(surgeries=["channels_last", ("stochastic_depth", {"drop_rate": 0.1})])
    assert model.has_surgery("channels_last") and model.has_surgery("stochastic_depth")
    assert not model.has_surgery("blurpool") and not model.has_surgery("drop_rate")


def test_validation_leaves_the_model_alone_and_accepts_what_apply_surgery_accepts():
    surgeries = ["blurpool", ("stochastic_depth", {"drop_rate": 0.2, "mode": "sample"}),
                 ("ghost_batchnorm", {"ghost_batch_size": 16}), "channels_last"]
    validate(TrainConfig(model=ModelConfig("cifar_resnet20", surgeries=surgeries)))
    with pytest.raises(ValueError, match=re.escape("model.surgeries[1] ('ghost_batchnorm', {'ghost_batch_size': 1}): "
                                                   "ghost_batch_size must be at least 2")):
        validate(TrainConfig(model=ModelConfig(surgeries=["blurpool", ("ghost_batchnorm", {"ghost_batch_size": 1})])))


def _full_config() -> TrainConfig:
    """A config with every kind of field set away from its default."""
    return TrainConfig(
        name="everything",
        model=ModelConfig("cifar_resnet20", surgeries=["blurpool", ("stochastic_depth", {"drop_rate": 0.1})]),
        optimizer=OptimizerConfig(betas=(0.8, 0.9), no_decay_embeddings=True, grad_clip_norm=1.0),
        data=DataConfig(crop_scale=(0.35, 1.0), randaugment=RandAugmentOptions(depth=2),
                        colout=ColOutOptions(0.1, 0.2), progressive_resize=ProgressiveResize(initial_scale=0.6)),
        methods=MethodsConfig(sam_rho=0.05),
        text=TextConfig(eval_length_multiples=(1, 3)),
    )


def test_saved_config_loads_back_equal_through_json_and_the_hash_follows_the_fields_not_the_name():
    config = _full_config()
    restored = from_dict(json.loads(json.dumps(to_dict(config))))
    assert restored == config and config_hash(restored) == config_hash(config)
    assert isinstance(restored.data.randaugment, RandAugmentOptions) and restored.text.eval_length_multiples == (1, 3)
    assert restored.model.surgeries[1] == ("stochastic_depth", {"drop_rate": 0.1})
    language = override(TrainConfig(), [*LANGUAGE_MODEL, "model.options={'n_layer': 2}",
                                        "methods.seq_length_warmup={}"])
    assert from_dict(json.loads(json.dumps(to_dict(language)))) == language
    renamed = override(config, ["name=other"])
    assert config_hash(renamed) == config_hash(config)
    for change in ("optimizer.lr=0.2", "data.randaugment.depth=1", "model.surgeries=['blurpool']",
                   "text.sequence_length=128", "compile=True"):
        assert config_hash(override(config, [change])) != config_hash(config), change


def test_a_field_added_later_leaves_the_hash_of_a_config_at_its_default_unchanged():
    """Runs recorded before ``compile`` existed keep their hash, so a resumed sweep still finds them."""
    values = to_dict(TrainConfig())
    del values["compile"]
    assert config_hash(from_dict(values)) == config_hash(TrainConfig())


def test_whole_numbers_in_float_fields_hash_as_floats():
    """RandAugmentOptions' severity defaults to the int 9: the config holds 9.0, as JSON gives it back."""
    config = TrainConfig(data=DataConfig(randaugment=RandAugmentOptions()), optimizer=OptimizerConfig(lr=1))
    assert isinstance(config.data.randaugment.severity, float) and isinstance(config.optimizer.lr, float)
    assert config_hash(from_dict(json.loads(json.dumps(to_dict(config))))) == config_hash(config)


@pytest.mark.parametrize("values, message", [
    ({"colour": 1}, "unknown configuration field 'colour'"),
    ({"data": {"randaugment": {"depth": 1, "colour": 1}}}, "unknown configuration field 'data.randaugment.colour'"),
    ({"model": {"blurpool": True}}, "unknown configuration field 'model.blurpool'; fields of model: name, options, "
                                    "surgeries"),
    ({"data": {"randaugment_depth": 1}}, "unknown configuration field 'data.randaugment_depth'"),
])
def test_from_dict_refuses_unknown_fields_at_every_level(values, message):
    saved = to_dict(TrainConfig())
    for section, fields in values.items():
        saved[section] = {**saved[section], **fields} if isinstance(fields, dict) else fields
    with pytest.raises(ValueError, match=re.escape(message)):
        from_dict(saved)


@pytest.mark.parametrize("assignments, message", [
    (["methods.mixup_alpha=0.2"], "methods.mixup_alpha=0.2 applies to task 'image_classification' only, and this "
                                  "run's task is 'language_model'; set methods.mixup_alpha=0.0"),
    (["methods.cutmix_alpha=1.0"], "methods.cutmix_alpha=1.0 applies to task 'image_classification' only"),
    (["data.randaugment={}"], "data.randaugment=RandAugmentOptions(depth=1, severity=9.0) applies to task "
                              "'image_classification' only"),
    (["data.colout={}"], "set data.colout=None"),
    (["data.progressive_resize={}"], "data.progressive_resize="),
    (["methods.loss=bce"], "methods.loss='bce' applies to task 'image_classification' only"),
    (["model.name=resnet50"], "model.name must be one of gpt, hf_gpt2 for task 'language_model', got 'resnet50'"),
    (["methods.seq_length_warmup={'start_length': 512}"],
     "methods.seq_length_warmup.start_length must be <= text.sequence_length=256, got 512"),
])
def test_language_models_refuse_what_only_images_use(assignments, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        override(TrainConfig(), [*LANGUAGE_MODEL, *assignments])


def test_language_models_allow_the_methods_any_model_takes():
    config = override(TrainConfig(), [*LANGUAGE_MODEL, "model.name=hf_gpt2", "methods.sam_rho=0.05",
                                      "methods.swa=True", "methods.label_smoothing=0.1",
                                      "methods.ema_half_life_steps=10",
                                      "model.surgeries=[('alibi', {'max_sequence_length': 1024})]"])
    assert config.model.has_surgery("alibi") and config.methods.swa


def test_images_refuse_sequence_length_warmup():
    with pytest.raises(ValueError, match=re.escape("methods.seq_length_warmup=SeqLengthWarmupOptions(start_length=8, "
                                                   "duration=0.3, multiple_of=8, keep_tokens=True) applies to task "
                                                   "'language_model' only, and this run's task is "
                                                   "'image_classification'; set methods.seq_length_warmup=None")):
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


def test_model_options_must_survive_json():
    config = dataclasses.replace(override(TrainConfig(), LANGUAGE_MODEL), model=ModelConfig("gpt", {"sizes": (1, 2)}))
    with pytest.raises(ValueError, match=re.escape("model.options must hold JSON values")):
        validate(config)


def test_configs_share_no_lists_or_dicts_with_their_sources():
    options, surgeries = {"n_layer": [2]}, ["blurpool"]
    config = override(TrainConfig(), LANGUAGE_MODEL)
    config = dataclasses.replace(config, model=ModelConfig("gpt", options=options, surgeries=surgeries))
    copy = override(config, [])
    copy.model.options["n_layer"].append(3)
    copy.model.surgeries.append("channels_last")
    assert config.model.options == options == {"n_layer": [2]} and config.model.surgeries == surgeries == ["blurpool"]
