"""``--import MODULE`` (fastcore_ops/training/plugins.py): a module that cannot be found, or that fails as it loads, is one
``error:`` line naming it and exit 2 from each command that takes it, with nothing written."""

import pytest

from fastcore_ops.training import plugins
from fastcore_ops.training.tradeoff.cli import main as tradeoff_main
from fastcore_ops.training.train import main as train_main

# A plugin as a user writes one, failing as it loads: the line its error comes from is 3 in each.
PLUGINS = {
    "raising": ('import os\n\nraise RuntimeError("boom")\n', "importing it raised RuntimeError: boom (line 3 of "),
    "syntax": ("x = 1\n\ndef f(:\n    pass\n", "importing it raised SyntaxError: invalid syntax (line 3 of "),
}
COMMANDS = {
    "train": lambda module, out: train_main(["--import", module, "--recipe", "cifar_baseline", "--out", str(out)]),
    "tradeoff": lambda module, out: tradeoff_main(["--import", module, "--recipes", "cifar_baseline", "--budgets",
                                                   "1", "--out", str(out)]),
}


def _plugin(tmp_path, monkeypatch, name, source):
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path / f"{name}.py"


@pytest.mark.parametrize("plugin", PLUGINS)
@pytest.mark.parametrize("command", COMMANDS)
def test_a_plugin_that_fails_as_it_is_imported_is_one_error_line_naming_it_and_exit_2(
        command, plugin, tmp_path, monkeypatch, capsys):
    # Each command ended with the plugin's bare traceback (and exit 1) before.
    monkeypatch.delenv(plugins.TRACEBACK_VARIABLE, raising=False)
    source, said = PLUGINS[plugin]
    path = _plugin(tmp_path, monkeypatch, f"failing_{plugin}_plugin", source)
    assert COMMANDS[command](f"failing_{plugin}_plugin", tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --import failing_{plugin}_plugin: {said}{path});"), err
    assert err.rstrip("\n").endswith(f"rerun with {plugins.TRACEBACK_VARIABLE}=1 to see its traceback")
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", COMMANDS)
def test_a_plugin_that_does_not_exist_is_refused_as_before(command, tmp_path, capsys):
    assert COMMANDS[command]("no_such_plugin_anywhere", tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert err == ("error: --import no_such_plugin_anywhere: No module named 'no_such_plugin_anywhere'; name a "
                   "module on the Python path (the working directory, PYTHONPATH or an installed package), as in: "
                   "--import my_package.my_task\n")
    assert not (tmp_path / "out").exists()


def test_a_plugin_whose_own_import_is_missing_is_named_as_failing_not_as_missing(tmp_path, monkeypatch):
    path = _plugin(tmp_path, monkeypatch, "needs_a_dependency_plugin", "import no_such_dependency_anywhere\n")
    with pytest.raises(ValueError) as raised:
        plugins.import_modules(["needs_a_dependency_plugin"])
    assert str(raised.value).startswith(
        "--import needs_a_dependency_plugin: importing it raised ModuleNotFoundError: No module named "
        f"'no_such_dependency_anywhere' (line 1 of {path});")


def test_the_traceback_variable_prints_the_plugin_s_own_traceback_before_the_error_line(
        tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(plugins.TRACEBACK_VARIABLE, "1")
    monkeypatch.delenv("RANK", raising=False)
    source = "def load():\n    return 1 / 0\n\nload()\n"
    path = _plugin(tmp_path, monkeypatch, "dividing_plugin", source)
    assert COMMANDS["train"]("dividing_plugin", tmp_path / "out") == 2
    *traceback, error = capsys.readouterr().err.splitlines()
    assert traceback[0] == "Traceback (most recent call last):"
    assert traceback[-1] == "ZeroDivisionError: division by zero"
    assert f'File "{path}", line 2, in load' in "\n".join(traceback) and "importlib" not in "\n".join(traceback)
    assert error.startswith(f"error: --import dividing_plugin: importing it raised ZeroDivisionError: division by "
                            f"zero (line 4 of {path});") and error.endswith(f"its traceback is above "
                                                                             f"({plugins.TRACEBACK_VARIABLE} is set)")
