"""The method registry is the one list of methods: what it declares, and that no other list exists."""

import ast
import dataclasses
from pathlib import Path

import pytest

from fastcore_ops.training.config import MethodsConfig, TrainConfig, override
from fastcore_ops.training.methods.mixup import MixUpOptions
from fastcore_ops.training.methods.registry import (HOOKS, STAGES, active, all_methods, plan_methods, register_method,
                                                    registered)

ROOT = Path(__file__).resolve().parents[3]
# Where method names may be listed: translations of our methods into another library's (the Composer
# comparison hands each of its methods to Composer's algorithm), and the frozen list of the methods
# stored hashes hold when off, which must never follow the registry. Each method registers itself in
# its own module, by its name alone: the methods' folder holds no list of them either.
MAY_LIST_METHODS = {"benchmarks/composer_run.py", "fastcore_ops/training/config/__init__.py"}


def _names_listed(node: ast.AST, names: set[str]) -> list[str]:
    """The registered method names among a list, tuple, set or dict literal's items (a dict's keys)."""
    items = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", [])
    return [item.value for item in items if isinstance(item, ast.Constant) and item.value in names]


def _sources(allowed: set[str]):
    """(path relative to the repository, parsed module) of the project's code outside the ``allowed`` places."""
    for folder in ("fastcore_ops", "benchmarks", "tools"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if not any(relative == place or relative.startswith(place + "/") for place in allowed):
                yield relative, ast.parse(path.read_text())


def test_no_list_of_method_names_exists_outside_the_registry():
    names = {method.name for method in all_methods()}
    found = []
    for relative, tree in _sources(MAY_LIST_METHODS):
        for node in ast.walk(tree):
            if isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.Dict)):
                listed = _names_listed(node, names)
                if len(listed) >= 2:
                    found.append(f"{relative}:{node.lineno} {listed}")
    assert not found, "lists of method names outside the registry:\n" + "\n".join(found)


# Where a method's options may be read by name (``config.methods.<name>``): its own module, the
# recipes (each built from another's values), and the translations into another library's
# methods and the benchmarks that time one recipe's own schedule.
MAY_READ_METHODS = {"fastcore_ops/training/recipes", "benchmarks/composer_run.py", "benchmarks/dataloader_tables.py"}


def _method_reads(tree: ast.AST, names: set[str]) -> list[tuple[int, str]]:
    """(line, name) of each ``<anything>.methods.<name>`` read of a registered method's options."""
    return [(node.lineno, node.attr) for node in ast.walk(tree) if isinstance(node, ast.Attribute)
            and node.attr in names and isinstance(node.value, ast.Attribute) and node.value.attr == "methods"]


def test_no_code_reads_a_method_by_name_outside_its_own_module():
    modules = {method.name: method.module.replace(".", "/") + ".py" for method in all_methods()}
    found = [f"{relative}:{line} methods.{name}" for relative, tree in _sources(MAY_READ_METHODS)
             for line, name in _method_reads(tree, set(modules)) if relative != modules[name]]
    assert not found, "methods read by name outside their module (give the method a hook):\n" + "\n".join(found)


def test_the_scan_above_finds_a_read_by_name():
    tree = ast.parse("smoothing = config.methods.label_smoothing\nmethods = config.methods\n")
    assert _method_reads(tree, {"label_smoothing"}) == [(1, "label_smoothing")]


@pytest.mark.parametrize("method", all_methods(), ids=lambda method: method.name)
def test_each_method_declares_what_the_run_needs_and_its_ablation_value_is_valid(method):
    assert method.stage in STAGES and method.task_names()
    assert dataclasses.is_dataclass(method.options) and isinstance(method.try_with, method.options)
    task = method.task_names()[0]
    config = override(TrainConfig(task=task, model=TrainConfig().model if task == "image_classification" else
                                  dataclasses.replace(TrainConfig().model, name="gpt")),
                      [f"methods.{method.name}={dataclasses.asdict(method.try_with)!r}"])
    assert getattr(config.methods, method.name) == method.try_with
    if method.stage == "step":
        assert [type(hook).__name__ for hook in plan_methods(config).hooks] == [type(method.try_with.attach(config)).__name__]


def test_step_methods_run_in_their_registered_order():
    config = override(TrainConfig(), ["methods.selective_backprop={}", "methods.ema={}", "methods.cutout={}",
                                      "methods.mixup={}", "methods.sam={}", "methods.low_precision_norm={}"])
    assert [type(hook).__name__ for hook in plan_methods(config).hooks] == [
        "LowPrecisionNorm", "Cutout", "MixUp", "SAM", "EMA", "SelectiveBackprop"]
    assert [method.name for method, _ in active(config.methods, "step")] == [
        "low_precision_norm", "cutout", "mixup", "sam", "ema", "selective_backprop"]


def test_a_registration_that_cannot_work_is_refused():
    @dataclasses.dataclass(frozen=True)
    class NoHooks:
        pass

    for stage, hook in HOOKS.items():
        with pytest.raises(TypeError, match=f"in the {stage} stage: NoHooks needs its {hook} method"):
            register_method("no_hooks", stage=stage, order=1)(NoHooks)
    with pytest.raises(ValueError, match="stage must be one of"):
        register_method("no_hooks", stage="lunch", order=1)
    for name in ("no-hooks", "class", ""):  # the field methods.<name> could not be made
        with pytest.raises(ValueError, match=f"a method's name must be a Python identifier .*, got {name!r}"):
            register_method(name, stage="step", order=200)
    with pytest.raises(ValueError, match="registered twice"):
        register_method("mixup", stage="surgery", order=1)(NoHooks)
    with pytest.raises(ValueError, match="unknown method 'spicy'; methods: alibi, alternating_flip, augmix"):
        registered("spicy")
    with pytest.raises(ValueError, match=r"a step method's order must be in \[100, 299\]"):
        register_method("early_step", stage="step", order=5)(MixUpOptions)
    with pytest.raises(ValueError, match="augmentation=True registers a step augmentation"):
        register_method("no_hooks", stage="loader", order=20, augmentation=True)
    assert "no_hooks" not in {field.name for field in dataclasses.fields(MethodsConfig)}


def test_every_augmentation_is_a_method_read_from_the_one_registry_at_its_order():
    from fastcore_ops.data.transforms.registry import augmentations

    entries = [entry for entry in augmentations() if entry.options is not None]  # the loader's own stages are not
    for entry in entries:
        method = registered(entry.name)
        assert (method.stage, method.order, method.options, method.module) == (
            "step" if entry.runs_in == "step" else "loader", entry.order, entry.options, entry.module), entry.name
    loader_and_step = [method.name for method in all_methods() if method.stage == "loader" or
                       method.name in {entry.name for entry in entries}]
    assert loader_and_step == [entry.name for entry in entries]


def test_each_surgery_is_a_method_as_its_own_module_declares_it():
    from fastcore_ops.surgery.core import registered_surgeries

    for surgery in registered_surgeries().values():
        method = registered(surgery.name)
        assert (method.stage, method.order, method.tasks, method.leaves_parameters_unused, method.loader_switch) == (
            "surgery", surgery.order, frozenset({surgery.inputs}), surgery.leaves_parameters_unused,
            surgery.loader_switch), surgery.name
        assert method.try_with == surgery.options(**surgery.tried_with) and method.module == surgery.options.__module__
