"""Whether a configuration can train: each field's type and range, and what the methods declare."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterator

from fastcore_ops.checks import check_bool, check_choice, check_int, check_interval, check_number, check_str
from fastcore_ops.data.loader import BACKENDS
from training.config.fields import built
from training.config.schema import (OPTIMIZERS, PRECISIONS, TOKENIZERS, DataConfig, ModelConfig, OptimizerConfig,
                                    ScheduleConfig, TextConfig, TrainConfig)
from training.methods.registry import active, all_methods
from training.tasks.registry import task_named


def validate(config: TrainConfig) -> None:
    """Raise TypeError (wrong type) or ValueError (wrong value) naming the first field that cannot work.

    >>> from fastcore_ops.surgery.stochastic_depth import StochasticDepthOptions
    >>> from training.config import MethodsConfig
    >>> validate(TrainConfig(methods=MethodsConfig(stochastic_depth=StochasticDepthOptions(drop_rate=1.5))))
    Traceback (most recent call last):
    ...
    ValueError: methods.stochastic_depth: drop_rate must be a number in [0, 1), ...
    """
    _check_finite(config)
    if not isinstance(config.name, str):
        raise TypeError(f"name must be a str, got {type(config.name).__name__} {config.name!r}")
    task = task_named(config.task)
    check_choice("precision", config.precision, PRECISIONS)
    check_bool("compile", config.compile)
    check_int("seed", config.seed, low=0)
    _validate_model(config.model, task)
    _validate_optimizer(config.optimizer)
    _validate_schedule(config.schedule)
    _validate_data(config.data)
    _validate_text(config.text)
    _validate_methods(config, task)


def _non_finite(value, path: str) -> Iterator[tuple[str, float]]:
    """(dotted path, value) of each inf or NaN float in ``value``, walking dataclass fields and tuple items.

    Those hold every float field of the configuration; ``model.options`` (a dict) must hold JSON
    values, which have no inf or NaN (:func:`_validate_model`).
    """
    if isinstance(value, float) and not math.isfinite(value):
        yield path, value
    elif dataclasses.is_dataclass(value):
        for field in dataclasses.fields(value):
            yield from _non_finite(getattr(value, field.name), f"{path}.{field.name}" if path else field.name)
    elif isinstance(value, tuple):
        for index, item in enumerate(value):
            yield from _non_finite(item, f"{path}[{index}]")


def _check_finite(config: TrainConfig) -> None:
    """Refuse inf and NaN in any float field, method options included, however the value arrived.

    One walk over every field, so that none can miss it: a range check lets inf through where it
    has no upper bound (a learning rate of inf trained NaN weights and exited 0), and NaN through
    where it has no bound at all; and ``--set optimizer.lr=1e999`` parses as inf.
    """
    found = next(_non_finite(config, ""), None)
    if found is not None:
        path, value = found
        overflow = " (a number past 1.8e308, such as 1e999, is inf)" if math.isinf(value) else ""
        raise ValueError(f"{path} must be a finite number, got {value!r}{overflow}; give a finite value")


def _validate_model(model: ModelConfig, task) -> None:
    check_str("model.name", model.name)
    if not isinstance(model.options, dict):
        raise TypeError(f"model.options must be a dict of the model builder's options, got "
                        f"{type(model.options).__name__} {model.options!r}")
    try:  # allow_nan=False: JSON has no inf or NaN, so a resumed run could not read them back
        restored = json.loads(json.dumps(model.options, allow_nan=False)) == model.options
    except (TypeError, ValueError, RecursionError):
        restored = False
    if not restored:
        raise ValueError(f"model.options must hold JSON values (str keys; numbers, strings, booleans, None, lists "
                         f"and dicts of them) so that config.json restores them, got {model.options!r}")
    task.check_model(model)


def _validate_optimizer(optimizer: OptimizerConfig) -> None:
    check_choice("optimizer.name", optimizer.name, OPTIMIZERS)
    check_number("optimizer.lr", optimizer.lr, low=0, low_open=True)
    check_int("optimizer.reference_batch", optimizer.reference_batch, low=1)
    check_number("optimizer.momentum", optimizer.momentum, low=0, high=1, high_open=True)
    if not (isinstance(optimizer.betas, tuple) and len(optimizer.betas) == 2):
        raise TypeError(f"optimizer.betas must be a (beta1, beta2) pair, got {optimizer.betas!r}")
    for index, beta in enumerate(optimizer.betas):
        check_number(f"optimizer.betas[{index}]", beta, low=0, high=1, high_open=True)
    check_number("optimizer.eps", optimizer.eps, low=0, low_open=True)
    check_number("optimizer.weight_decay", optimizer.weight_decay, low=0)
    for flag in ("nesterov", "decoupled_weight_decay", "no_decay_norm_and_bias", "no_decay_embeddings"):
        check_bool(f"optimizer.{flag}", getattr(optimizer, flag))
    check_number("optimizer.grad_clip_norm (0 = off)", optimizer.grad_clip_norm, low=0)
    check_number("optimizer.trust_coefficient", optimizer.trust_coefficient, low=0, low_open=True)
    if optimizer.nesterov and optimizer.name in ("adamw", "lamb"):
        raise ValueError(f"optimizer.nesterov must be False with optimizer.name={optimizer.name!r} (Nesterov "
                         f"momentum is SGD's and LARS's; its momentum is betas[0]), got True")
    if optimizer.decoupled_weight_decay and optimizer.name in ("lamb", "lars"):
        raise ValueError(f"optimizer.decoupled_weight_decay must be False with optimizer.name={optimizer.name!r}: "
                         f"it adds the decay to the update before the trust ratio, as its paper does")
    if optimizer.nesterov and optimizer.momentum == 0:
        raise ValueError("optimizer.nesterov must be False when optimizer.momentum is 0 (Nesterov needs "
                         "momentum), got True")


def _validate_schedule(schedule: ScheduleConfig) -> None:
    check_number("schedule.epochs", schedule.epochs, low=0, low_open=True)
    check_number("schedule.warmup_epochs", schedule.warmup_epochs, low=0)
    if schedule.warmup_epochs > schedule.epochs:
        raise ValueError(f"schedule.warmup_epochs must be in [0, schedule.epochs={schedule.epochs}], "
                         f"got {schedule.warmup_epochs!r}")
    check_number("schedule.final_lr_fraction", schedule.final_lr_fraction, low=0, high=1)
    check_number("schedule.scale_schedule_ratio", schedule.scale_schedule_ratio, low=0, low_open=True)


def _validate_data(data: DataConfig) -> None:
    check_int("data.batch_size", data.batch_size, low=1)
    check_int("data.train_size", data.train_size, low=1)
    check_int("data.eval_size", data.eval_size, low=1)
    check_int("data.eval_resize", data.eval_resize, low=data.eval_size)
    check_interval("data.crop_scale", data.crop_scale, high=1.0)
    check_choice("data.backend", data.backend, BACKENDS)
    check_int("data.num_workers (-1 = one per core)", data.num_workers, low=-1)
    check_bool("data.flip", data.flip)


def _validate_text(text: TextConfig) -> None:
    check_choice("text.tokenizer", text.tokenizer, TOKENIZERS)
    check_int("text.vocab_size", text.vocab_size, low=257)  # the 256 byte tokens and at least one merge
    check_int("text.sequence_length", text.sequence_length, low=1)
    check_int("text.validation_every", text.validation_every, low=2)  # 1 would leave no training file
    multiples = text.eval_length_multiples
    if not (isinstance(multiples, tuple) and multiples):
        raise TypeError(f"text.eval_length_multiples must be a non-empty tuple of ints, got {multiples!r}")
    for index, multiple in enumerate(multiples):
        check_int(f"text.eval_length_multiples[{index}]", multiple, low=1)
    if list(multiples) != sorted(set(multiples)):
        raise ValueError(f"text.eval_length_multiples must increase, each multiple once, got {multiples!r}")
    longest = text.sequence_length * multiples[-1]
    check_int(f"text.eval_batch_tokens (at least one sequence of the longest evaluation length, {longest})",
              text.eval_batch_tokens, low=longest)


def _validate_methods(config: TrainConfig, task) -> None:
    """Each method that is on: its options' type, its task, and what it declares about the rest of the run."""
    for method in all_methods():
        options = getattr(config.methods, method.name)
        if options is not None and not isinstance(options, method.options):
            raise TypeError(f"methods.{method.name} must be None (off) or a {method.options.__name__}, got "
                            f"{type(options).__name__} {options!r}")
    chosen = active(config.methods)
    for method, options in chosen:
        if not method.applies_to(task):
            raise ValueError(f"methods.{method.mismatch(task)} (this run's task); set methods.{method.name}=None")
        if method.check is not None:
            built(f"methods.{method.name}", method.check, options, config)
    mixing = [method.name for method, _ in chosen if method.mixes_batch]
    if len(mixing) > 1:
        raise ValueError(f"methods.{mixing[1]} must be None when methods.{mixing[0]} is on (one batch mixing at a "
                         f"time)")

