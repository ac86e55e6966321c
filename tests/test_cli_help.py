"""Every command speaks one language: each option explained with its default, plain descriptions, the shared
options spelled one way, and a mistyped name answered with its flag and the closest names.

``python -m fastcore_ops.training.torchrun`` is not in COMMANDS: its options are torchrun's own, from torch's
parser; only its --help is held, with every command's, to importing nothing heavy.
"""

import argparse
import importlib
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from fastcore_ops import cli
from tests.tool_module import load_tool

# Each command, by the module that builds its parser (tools/ scripts are not a package: "tools/name").
COMMANDS = [
    "fastcore_ops.training.train", "fastcore_ops.training.tradeoff.cli", "fastcore_ops.training.ablate.cli",
    "fastcore_ops.training.alibi_extrapolation", "fastcore_ops.training.export.cli", "fastcore_ops.training.text.prepare",
    "fastcore_ops.training.recipes.__main__",
    "fastcore_ops.data.prepare", "fastcore_ops.data.datasets", "benchmarks.kernels.__main__", "benchmarks.kernels.retune",
    "benchmarks.kernels.host_side", "benchmarks.kernels.declarations", "benchmarks.kernels.goals",
    "benchmarks.kernels.faster_rivals", "benchmarks.kernels.precompile", "benchmarks.surgery",
    "benchmarks.dataloader", "benchmarks.peers", "benchmarks.step_floor", "benchmarks.composer_job", "benchmarks.airbench_job",
    "benchmarks.gpu_check.__main__", "tools/method_cards", "tools/readme_tables",
]

ROOT = Path(__file__).resolve().parents[1]
# What builds a command's parser, and the modules that only share such builders.
BUILDERS = ("ArgumentParser(", "job_parser(")
SHARED = {"fastcore_ops/cli.py", "benchmarks/job_cli.py", "fastcore_ops/training/tradeoff/options.py"}

# The one spelling of each shared concept, by the spellings it could take (lowercase, without dashes or _).
SPELLINGS = {
    "--batch-size": {"batch", "batchsize", "bs", "batches"},
    "--device": {"device", "dev", "devices"},
    "--out": {"out", "output", "outdir", "outputdir", "outfolder", "outputfolder", "outpath", "o"},
    "--no-progress": {"progress", "noprogress", "nobar", "nobars", "noprogressbar", "noprogressbars", "quiet"},
    "--seed": {"seed", "randomseed", "rngseed"},
}
# The one spelling of each concept a command names one at a time, by the spellings it could take; a flag that
# takes a list of them is the plural, and only such a flag (fastcore_ops/cli.py's rule).
CONCEPTS = {
    "--recipe": {"recipe", "recipes", "base", "bases", "baserecipe", "baserecipes"},
    "--budget": {"budget", "budgets", "scaleschedule", "scaleschedules", "scalescheduleratio", "ratio", "ratios"},
    "--method": {"method", "methods"},
}


# What no command may import to parse its command line (a --help or a refused command line): each takes
# seconds to import on a busy box, and the parser needs none of them.
HEAVY = ("torch", "triton", "numpy")
# Runs a command in a child as ``python -m`` (or a script) does, then prints its exit status and the HEAVY
# modules it imported.
CHILD = f"""
import runpy, sys
target = sys.argv[1]
sys.argv = sys.argv[1:]
try:
    if target.endswith(".py"):
        runpy.run_path(target, run_name="__main__")
    else:
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    status = 0
except SystemExit as stop:
    status = stop.code
print("status", status, *[name for name in {HEAVY!r} if name in sys.modules])
"""


def command_line(command: str) -> str:
    """What ``python -m`` runs for ``command`` (the package of a ``cli`` or ``__main__`` module), or its script."""
    if command.startswith("tools/"):
        return f"{command}.py"
    return command.removesuffix(".__main__").removesuffix(".cli")


def build_parser(command: str) -> argparse.ArgumentParser:
    if command.startswith("tools/"):
        return load_tool(command.removeprefix("tools/")).build_parser()
    return importlib.import_module(command).build_parser()


@pytest.fixture(scope="module", params=COMMANDS)
def parser(request):
    return build_parser(request.param)


def options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """Every argument of ``parser`` but -h."""
    return [action for action in parser._actions if not isinstance(action, argparse._HelpAction)]


def shown_help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """An argument's help as --help prints it, before line wrapping."""
    return parser._get_formatter()._expand_help(action)


def has_default(action: argparse.Action) -> bool:
    """Whether --help is to show the argument's default: any but None, False and an empty list (0 included)."""
    default = action.default
    return not (default is None or default is False or default == [] or default == argparse.SUPPRESS)


def test_help_prints_and_exits_0(parser, capsys):
    with pytest.raises(SystemExit) as stop:
        parser.parse_args(["--help"])
    assert stop.value.code == 0
    assert capsys.readouterr().out == parser.format_help()


def test_every_option_has_help_text(parser):
    missing = [action.dest for action in options(parser) if not action.help or action.help == argparse.SUPPRESS]
    assert not missing, f"{parser.prog}: no help for {missing}"


def test_every_default_is_shown_once(parser):
    for action in options(parser):
        text = shown_help(parser, action)
        assert text.count("(default") <= 1, f"{parser.prog} {action.dest}: the default is given twice: {text}"
        if getattr(action, "machine_default", False):  # this machine's value: the help states the rule instead
            assert "(default: " in text and f"(default: {action.default})" not in text, text
        elif has_default(action):
            assert f"(default: {action.default})" in text, f"{parser.prog} {action.dest}: no default shown: {text}"


def test_no_help_shows_a_default_only_this_machine_has(parser):
    """Not this checkout's absolute paths, nor the device this machine picks: the rule that picks them."""
    text = " ".join(parser.format_help().split())
    assert "(default: /" not in text and "(default: cpu)" not in text and "(default: cuda)" not in text, text


def test_descriptions_are_plain_text(parser):
    assert parser.description, f"{parser.prog} has no description"
    text = parser.format_help()
    assert "``" not in text and ":mod:" not in text and ":func:" not in text, text
    assert "issue " not in text.lower(), text


def test_shared_options_are_spelled_one_way(parser):
    for action in options(parser):
        for flag in action.option_strings:
            word = flag.lstrip("-").replace("-", "").replace("_", "").lower()
            for spelling, variants in SPELLINGS.items():
                assert word not in variants or flag == spelling, f"{parser.prog}: {flag} should be {spelling}"


def takes_a_list(action: argparse.Action) -> bool:
    """Whether the argument takes several values: as separate words, or comma-separated (its help says so)."""
    return action.nargs in ("+", "*") or "comma-separated" in (action.help or "")


def test_each_concept_is_one_flag_plural_when_it_takes_a_list(parser):
    for action in options(parser):
        for flag in action.option_strings:
            word = flag.lstrip("-").replace("-", "").replace("_", "").lower()
            for spelling, variants in CONCEPTS.items():
                wanted = f"{spelling}s" if takes_a_list(action) else spelling
                assert word not in variants or flag == wanted, f"{parser.prog}: {flag} should be {wanted}"


def test_where_a_command_writes_is_never_a_default(parser):
    """--out (or a positional output folder) is required: no command writes where it was not told to."""
    for action in parser._actions:
        if "--out" in action.option_strings or action.dest in ("out", "destination"):
            assert action.required and action.default in (None, argparse.SUPPRESS), f"{parser.prog}: {action.dest}"


@pytest.mark.parametrize(("command", "argv", "said"), [
    ("fastcore_ops.training.ablate.cli", ["--base", "cifar_mild"], "error: --base is now --recipe; see "),
    ("fastcore_ops.training.train", ["--recipe", "cifar_mild", "--scale-schedule=0.5"],
     "error: --scale-schedule is now --budget; see "),
])
def test_an_old_spelling_is_refused_naming_the_new_one(command, argv, said, tmp_path, capsys):
    main = importlib.import_module(command).main
    assert refused(main, [*argv, "--out", str(tmp_path / "out")], capsys).startswith(said)
    assert not (tmp_path / "out").exists()


def test_shared_options_read_the_same_everywhere(parser):
    wording = {"--device": cli.DEVICE_HELP, "--no-progress": cli.NO_PROGRESS_HELP}
    for action in options(parser):
        for flag in set(action.option_strings) & set(wording):
            assert action.help == wording[flag], f"{parser.prog} {flag}: {action.help!r}"


def test_every_command_of_the_project_is_walked():
    """A new command (a module that builds a parser) is walked by the tests above once it is in COMMANDS."""
    found = set()
    for folder in ("fastcore_ops", "benchmarks", "tools"):
        for path in (ROOT / folder).rglob("*.py"):
            relative = path.relative_to(ROOT).as_posix()
            if relative not in SHARED and any(builder in path.read_text() for builder in BUILDERS):
                found.add(relative)
    listed = {f"{command}.py" if command.startswith("tools/") else command.replace(".", "/") + ".py"
              for command in COMMANDS}
    assert found == listed


# torchrun's own flags are parsed by torch's parser: only its --help is light.
@pytest.mark.parametrize(("command", "argv"), [
    *[(command_line(command), argv) for command in COMMANDS for argv in (["--help"], ["--no-such-flag"])],
    ("fastcore_ops.training.torchrun", ["--help"])])
def test_parsing_imports_no_heavy_module(command, argv):
    """--help, and a command line the parser refuses, answer without importing torch, triton or numpy: parse
    first, import the machinery after."""
    child = subprocess.run([sys.executable, "-c", CHILD, command, *argv], cwd=ROOT, capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
    status, *heavy = child.stdout.splitlines()[-1].split()[1:]
    assert (status, heavy) == ("0" if argv == ["--help"] else "2", []), child.stdout[-2000:] + child.stderr[-2000:]


@pytest.mark.parametrize(("text", "known", "said"), [
    ("cifar_mlid", ["cifar_medium", "cifar_mild", "cifar_mild_small"], "did you mean cifar_mild?"),
    ("emma", ["ema", "swa", "sam"], "did you mean ema?"),
    ("cifar_mild_smal", ["cifar_hot_small", "cifar_mild_small", "cifar_mild"], "did you mean cifar_mild_small?"),
    ("resnet", ["alibi", "sam"], "known: alibi, sam"),
])
def test_the_closest_names_are_suggested(text, known, said):
    assert cli.closest(text, known) == said


def refused(main, argv: list[str], capsys) -> str:
    """The one error line ``main(argv)`` refuses with (exit 2)."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    return err.strip()


@pytest.mark.parametrize(("argv", "said"), [
    (["--recipe", "cifar_mlid"], "error: --recipe cifar_mlid: no such recipe; did you mean cifar_mild?"),
    (["--recipe", "gpt_alibbi"], "error: --recipe gpt_alibbi: no such recipe; did you mean gpt_alibi?"),
    (["--recipe", "cifar_mild", "--model", "convnext_tiyn"],
     "error: --model convnext_tiyn: no such model; did you mean convnext_tiny?"),
])
def test_train_names_a_mistyped_recipe_or_model_with_its_flag(argv, said, tmp_path, capsys):
    from fastcore_ops.training.train import main

    assert refused(main, [*argv, "--out", str(tmp_path / "run")], capsys) == said
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("argv", "said"), [
    (["--recipe", "cifar_basline"], "error: --recipe cifar_basline: no such recipe; did you mean cifar_baseline?"),
    (["--recipe", "cifar_mild", "--methods", "cutout,mixip"],
     "error: --methods mixip: no such method; did you mean mixup?"),
])
def test_ablate_names_a_mistyped_recipe_or_method_with_its_flag(argv, said, tmp_path, capsys):
    from fastcore_ops.training.ablate.cli import main

    assert refused(main, [*argv, "--out", str(tmp_path / "ablation")], capsys) == said
    assert not (tmp_path / "ablation").exists()


def test_each_console_script_runs_the_main_of_a_command_walked_here():
    """pyproject.toml's scripts (fastcore-train, ...) are the shipped commands under short names: each calls the
    main of a command above, or torchrun's wrapper, so it refuses and helps as they do."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    for script, target in scripts.items():
        module, function = target.split(":")
        assert script.startswith("fastcore-") and cli.is_console_script(script)
        assert module in COMMANDS or module == "fastcore_ops.training.torchrun", script
        assert function == "main" and callable(importlib.import_module(module).main), script
    shipped = {command for command in COMMANDS if command.startswith("fastcore_ops.")}
    assert shipped <= {target.split(":")[0] for target in scripts.values()}, "a shipped command without a script"


def test_a_console_script_names_itself_in_its_usage_and_errors(monkeypatch):
    from fastcore_ops.training.train import build_parser

    monkeypatch.setattr("sys.argv", ["/venv/bin/fastcore-train", "--help"])
    parser = build_parser()
    assert parser.format_usage().startswith("usage: fastcore-train ")
    with pytest.raises(ValueError, match="see fastcore-train --help"):
        parser.parse_args(["--no-such-flag"])
