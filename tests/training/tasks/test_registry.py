"""The task registry is the one place tasks are named: what it refuses, and that no other code compares task names."""

import ast
from pathlib import Path

import pytest

from fastcore_ops.training.tasks.base import Task
from fastcore_ops.training.tasks.registry import all_tasks, register_task, task_named, task_names

ROOT = Path(__file__).resolve().parents[3]
TASK_MODULES = "fastcore_ops/training/tasks"
BUILT_IN = ("image_classification", "language_model")


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}


def _names_a_run_config(node: ast.Constant, parents: dict) -> bool:
    """Whether ``node`` is a configuration's value: ``task="..."`` in a call, or the ``task: str = ...`` default."""
    parent = parents.get(node)
    if isinstance(parent, ast.keyword):
        return parent.arg == "task"
    return isinstance(parent, ast.AnnAssign) and getattr(parent.target, "id", None) == "task"


def _docstrings(tree: ast.AST) -> set[ast.AST]:
    return {body[0].value for node in ast.walk(tree) if (body := getattr(node, "body", None)) and isinstance(body, list)
            and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)}


def test_no_code_outside_a_task_module_names_a_task():
    found = []
    for folder in ("fastcore_ops", "benchmarks", "tools"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if relative.startswith(TASK_MODULES + "/"):
                continue
            tree = ast.parse(path.read_text())
            parents, docstrings = _parents(tree), _docstrings(tree)
            for node in ast.walk(tree):
                if (isinstance(node, ast.Constant) and node.value in BUILT_IN and node not in docstrings
                        and not _names_a_run_config(node, parents)):
                    found.append(f"{relative}:{node.lineno} {node.value!r}")
    assert not found, "task names outside the task modules (ask the task object instead):\n" + "\n".join(found)


def _task_comparisons(tree: ast.AST, classes: set[str]) -> list[int]:
    """Lines comparing to a task class (``task is ImageClassification``) or a task's attribute to a constant
    (``record.sample_unit == "images"``): branching on which task it is, by other means than its name."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and all(isinstance(op, EQUALITY) for op in node.ops):
            operands = [node.left, *node.comparators]
            names = {getattr(operand, "id", getattr(operand, "attr", None)) for operand in operands}
            constant = any(isinstance(operand, ast.Constant) and isinstance(operand.value, str) for operand in operands)
            if names & classes or (constant and names & TASK_ATTRIBUTES):
                found.append(node.lineno)
    return found


EQUALITY = (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)
# What a task says of itself that code outside the tasks reads (its ``metric`` name is left out: other things,
# the kernel benchmarks' goals, have a metric too).
TASK_ATTRIBUTES = {"metric_label", "sample_unit", "model_size_name"}


def test_no_code_outside_a_task_module_compares_a_task_s_class_or_attributes():
    classes = {task.__name__ for task in all_tasks()}
    found = []
    for folder in ("fastcore_ops", "benchmarks", "tools"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if not relative.startswith(TASK_MODULES + "/"):
                found += [f"{relative}:{line}" for line in _task_comparisons(ast.parse(path.read_text()), classes)]
    assert not found, "code that branches on which task it runs (give the task a method or attribute):\n" + (
        "\n".join(found))
    tree = ast.parse('if task is ImageClassification or run.sample_unit == "images":\n    pass\n')
    assert _task_comparisons(tree, classes) == [1, 1], "the scan finds both kinds"


def test_the_scan_above_finds_a_compared_task_name():
    tree = ast.parse('if config.task == "language_model":\n    pass\nTrainConfig(task="language_model")\n')
    parents = _parents(tree)
    flagged = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Constant)
               and node.value in BUILT_IN and not _names_a_run_config(node, parents)]
    assert flagged == [1]


def test_the_built_in_tasks_are_registered_with_what_the_commands_ask_of_them():
    assert [name for name in task_names() if name in BUILT_IN] == list(BUILT_IN)
    for task in all_tasks():
        assert issubclass(task, Task) and task_named(task.name) is task
        assert task.metric and isinstance(task.higher_is_better, bool) and task.model_names()


@pytest.mark.parametrize("name, error, message", [
    ("speech", ValueError, "task must be one of 'image_classification', 'language_model'"),
    (3, TypeError, "task must be a task name"),
])
def test_an_unknown_task_lists_the_registered_ones_and_how_to_add_one(name, error, message):
    with pytest.raises(error, match=message) as raised:
        task_named(name)
    assert error is TypeError or "--import MODULE" in str(raised.value)


def test_a_task_name_registered_twice_is_refused():
    with pytest.raises(ValueError, match="task 'image_classification' is registered twice"):
        register_task("image_classification")(type("Other", (Task,), {}))
    with pytest.raises(ValueError, match="a Python identifier"):
        register_task("image classification")
