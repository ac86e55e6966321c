"""``python -m fastcore_ops.training.recipes show NAME``: the line of parents, the recipe as it trains, its changes."""

import json

import pytest

from fastcore_ops.training import recipes
from fastcore_ops.training.config import from_dict
from fastcore_ops.training.recipes import Derived, get_recipe
from fastcore_ops.training.recipes.__main__ import main, show


def test_show_prints_the_parents_the_resolved_config_and_the_changes():
    text = show("cifar_mild_small")
    first, rest = text.split("\n", 1)
    configuration, changes = rest.split("\nchanges from ")
    assert first == "recipe cifar_baseline > cifar_mild > cifar_mild_small"
    assert from_dict(json.loads(configuration)) == get_recipe("cifar_mild_small")
    assert changes.splitlines() == ["cifar_mild:", "  optimizer.lr: 0.3 -> 0.6",
                                    "  optimizer.weight_decay: 0.0005 -> 0.001"]


def test_a_root_recipe_shows_its_changes_from_the_defaults():
    text = show("cifar_baseline")
    assert text.startswith("recipe cifar_baseline\n")
    assert "\nchanges from the defaults (a root recipe):\n  model.name: 'resnet50' -> 'cifar_resnet20'\n" in text


def test_a_method_turned_on_shows_whole_and_one_changed_shows_its_option():
    changes = show("cifar_hot").split("\nchanges from cifar_medium:\n")[1].splitlines()
    assert "  methods.colout: None -> ColOutOptions(p_row=0.05, p_col=0.05)" in changes
    assert "  methods.sam.interval: 10 -> 5" in changes


@pytest.mark.parametrize(("argv", "said"), [
    (["show", "cifar_mlid"], "error: show cifar_mlid: no such recipe; did you mean cifar_mild?"),
    (["list", "cifar_mild"], "error: argument command: invalid choice: 'list' (choose from 'show'); see "),
    (["show", "a"], "error: recipe a descends from itself: a -> b -> a"),
])
def test_a_bad_name_or_recipe_is_refused_with_one_line(argv, said, capsys, monkeypatch):
    monkeypatch.setitem(recipes._REGISTERED, "a", Derived("b", {}))
    monkeypatch.setitem(recipes._REGISTERED, "b", Derived("a", {}))
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(said) and captured.err.count("\n") == 1 and not captured.out
