"""Installing fastcore_ops into a user's environment: without Triton, and without replacing PyTorch.

Where Triton is not installed (macOS, Windows, CPU-only images) the tests run a fresh
interpreter in which ``import triton`` fails, as it does there.
"""

import ast
import configparser
import importlib.metadata
import inspect
import os
import subprocess
import sys
import textwrap
import tomllib
import zipfile
from pathlib import Path

import pytest
import torch
import torchvision
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.hang_guard import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[1]

# Put first on sys.meta_path, this makes every import of triton (or a submodule) fail.
_BLOCK_TRITON = textwrap.dedent("""
    import importlib.abc
    import sys

    class _NoTriton(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "triton" or name.startswith("triton."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, _NoTriton())
""")

_REFERENCE_VALUES = textwrap.dedent("""
    import torch
    import fastcore_ops
    from fastcore_ops import apply_surgery
    from fastcore_ops.kernels import (alibi_attention, alibi_slopes, backend, bce_with_logits, blur_maxpool2d,
                                      blurpool2d, ghost_batch_norm)
    from fastcore_ops.kernels.alibi import alibi_attention_reference
    from fastcore_ops.kernels.bce import bce_with_logits_reference
    from fastcore_ops.kernels.blur_maxpool import blur_maxpool2d_reference
    from fastcore_ops.kernels.blurpool import blurpool2d_reference
    from fastcore_ops.kernels.ghost_batchnorm import ghost_batch_norm_reference

    assert not backend.TRITON_AVAILABLE and not backend.INTERPRETING
    assert "triton" not in sys.modules
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 3, 9, 9, generator=g)
    close = torch.testing.assert_close
    close(blurpool2d(x), blurpool2d_reference(x))
    close(blur_maxpool2d(x, 3, 2, 1), blur_maxpool2d_reference(x, 3, 2, 1))
    mean, var = torch.zeros(3), torch.ones(3)
    ref_mean, ref_var = mean.clone(), var.clone()
    close(ghost_batch_norm(x, mean, var, training=True, ghost_batch_size=2),
          ghost_batch_norm_reference(x, ref_mean, ref_var, training=True, ghost_batch_size=2))
    close((mean, var), (ref_mean, ref_var))
    logits, labels = torch.randn(5, 7, generator=g), torch.randint(0, 7, (5,), generator=g)
    close(bce_with_logits(logits, labels, label_smoothing=0.1),
          bce_with_logits_reference(logits, labels, label_smoothing=0.1))
    q, k, v = (torch.randn(1, 2, 6, 16, generator=g) for _ in range(3))
    close(alibi_attention(q, k, v, is_causal=True), alibi_attention_reference(q, k, v, is_causal=True))
    assert alibi_slopes(2).tolist() == [2.0 ** -4, 2.0 ** -8]

    # Empty inputs go through the custom ops, which launch nothing: the stand-in's helpers.
    assert blurpool2d(torch.zeros(0, 3, 8, 8)).shape == (0, 3, 4, 4)
    assert ghost_batch_norm(torch.zeros(0, 3), None, None, training=True).shape == (0, 3)
    assert bce_with_logits(torch.zeros(0, 7), torch.zeros(0, dtype=torch.long)).item() == 0
    assert alibi_attention(*(torch.zeros(1, 2, 0, 16),) * 3).shape == (1, 2, 0, 16)

    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.MaxPool2d(3, 2, 1),
                          nn.Conv2d(16, 16, 3, stride=2, padding=1))
    apply_surgery(model, ["blurpool", ("ghost_batchnorm", {"ghost_batch_size": 2}), "channels_last"])
    model(x).sum().backward()
    print("references ran")
""")

_INTERPRETER_ASKED = textwrap.dedent("""
    import torch
    from fastcore_ops.kernels import backend, blurpool2d

    try:
        blurpool2d(torch.zeros(1, 1, 4, 4))
    except backend.TritonMissingError as error:
        print(error)
    else:
        raise AssertionError("the interpreter was asked for and Triton is missing, but nothing was raised")
""")


def _run_without_triton(script: str, **variables: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("FASTCORE_OPS_INTERPRET", "TRITON_INTERPRET")}
    env.update(variables)
    return subprocess.run([sys.executable, "-c", _BLOCK_TRITON + script], env=env, capture_output=True, text=True,
                          timeout=HANG_GUARD_S)


def test_without_triton_every_kernel_runs_its_reference_on_the_cpu():
    result = _run_without_triton(_REFERENCE_VALUES)
    assert result.returncode == 0, result.stderr
    assert "references ran" in result.stdout


@pytest.mark.parametrize("variable", ["FASTCORE_OPS_INTERPRET", "TRITON_INTERPRET"])
def test_asking_for_the_interpreter_without_triton_is_a_clear_error(variable):
    result = _run_without_triton(_INTERPRETER_ASKED, **{variable: "1"})
    assert result.returncode == 0, result.stderr
    assert "needs Triton, which is not installed" in result.stdout
    assert "pip install triton" in result.stdout and "unset FASTCORE_OPS_INTERPRET" in result.stdout


def _declared_requirements() -> tuple[list[Requirement], dict[str, list[Requirement]]]:
    """The dependencies and optional dependencies pyproject.toml declares."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    parse = lambda lines: [Requirement(line) for line in lines]  # noqa: E731
    return parse(project["dependencies"]), {name: parse(lines) for name, lines in
                                            project["optional-dependencies"].items()}


def test_the_package_declares_a_pytorch_range_that_keeps_the_installed_one():
    required, extras = _declared_requirements()
    by_name = {r.name: r for r in required}
    for name, module in (("torch", torch), ("torchvision", torchvision)):
        specifier = by_name[name].specifier
        assert not any(s.operator in ("==", "===") for s in specifier), f"{name} is pinned: {specifier}"
        assert any(s.operator == "<" for s in specifier), f"{name} has no upper bound: {specifier}"
        installed = Version(module.__version__.split("+")[0])
        assert specifier.contains(installed), f"the installed {name} {installed} is outside {specifier}"
    assert {r.name for r in extras["dali-cuda12"]} == {"nvidia-dali-cuda120"}
    assert {r.name for r in extras["dali-cuda13"]} == {"nvidia-dali-cuda130"}


def _imported_modules() -> set[str]:
    """The top-level names every Python file of the repository imports, wherever in the file."""
    names = set()
    for path in [ROOT / "setup.py", ROOT / "conftest.py",
                 *(p for folder in ("fastcore_ops", "benchmarks", "tests", "tools")
                   for p in (ROOT / folder).rglob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names.add(node.module.split(".")[0])
    return names


class _OptionRecorder:
    """Stands in for pytest's parser, and for its option groups, in a plugin's ``pytest_addoption``: keeps the
    names of the options declared."""

    def __init__(self):
        self.names = set()

    def getgroup(self, *args, **kwargs):
        return self

    def addoption(self, *names, **kwargs):
        self.names.update(names)

    _addoption = addoption

    def addini(self, *args, **kwargs):
        pass


def _plugin_options() -> dict[str, set[str]]:
    """The command-line options each installed pytest plugin declares, by its distribution's name."""
    options = {}
    for entry_point in importlib.metadata.entry_points(group="pytest11"):
        recorder = _OptionRecorder()
        add_options = getattr(entry_point.load(), "pytest_addoption", None)
        if add_options is not None:
            add_options(**{name: recorder if name == "parser" else None
                           for name in inspect.signature(add_options).parameters})
        options.setdefault(canonicalize_name(entry_point.dist.name), set()).update(recorder.names)
    return options


def _suite_command() -> set[str]:
    """The options the suite runs with: pytest.ini's addopts and those of ``make test``'s pytest line."""
    words = configparser.ConfigParser(interpolation=None)
    words.read(ROOT / "pytest.ini")
    makefile = (ROOT / "Makefile").read_text()
    command = next(line for line in makefile[makefile.index("\ntest:"):].splitlines() if "-m pytest" in line)
    return {word.split("=")[0] for word in [*words["pytest"]["addopts"].split(), *command.split("-m pytest")[1].split()]}


def test_every_declared_dependency_installed_here_is_used():
    required, extras = _declared_requirements()
    modules_of = {}  # distribution -> the top-level modules it installs
    for module, distributions in importlib.metadata.packages_distributions().items():
        for distribution in distributions:
            modules_of.setdefault(canonicalize_name(distribution), set()).add(module)
    plugin_options = _plugin_options()
    imported, suite_command = _imported_modules(), _suite_command()
    declared = {canonicalize_name(r.name) for block in [required, *extras.values()] for r in block}
    installed = declared & set(modules_of)
    assert declared - installed == {"nvidia-dali-cuda120"}  # make installs the rest: DALI for CUDA 13 only
    unused = [name for name in sorted(installed) if not modules_of[name] & imported
              and not plugin_options.get(name, set()) & suite_command]
    assert not unused, (f"declared in pyproject.toml but never imported (nor a pytest plugin whose options pytest.ini "
                        f"or make test set): {unused}")
    assert {"dev", "gpt", "data"} <= set(extras)  # what the Makefile installs


def test_a_built_wheel_holds_the_library_and_its_trainer(tmp_path):
    """fastcore_ops with its trainer and console scripts; no generic top-level name (benchmarks, tools) beside a
    user's packages, and no conftest.py."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp_path)], cwd=ROOT, check=True, capture_output=True)
    (wheel,) = tmp_path.glob("fastcore_ops-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    (metadata,) = {name.split("/")[0] for name in names} - {"fastcore_ops"}
    assert metadata.startswith("fastcore_ops-") and metadata.endswith(".dist-info")
    assert "fastcore_ops/kernels/bce.py" in names and not any(name.endswith("conftest.py") for name in names)
    assert "fastcore_ops/training/train.py" in names
    entry_points = configparser.ConfigParser()
    entry_points.read_string(zipfile.ZipFile(wheel).read(f"{metadata}/entry_points.txt").decode())
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert dict(entry_points["console_scripts"]) == declared and "fastcore-train" in declared
    # The tables the kernels read at import, and the mark that tells type checkers to read the annotations.
    assert {"fastcore_ops/kernels/tuned_configs.json", "fastcore_ops/kernels/faster_rivals.json",
            "fastcore_ops/py.typed"} <= set(names)
    # A licence anyone adopting the code can read: the file itself, and named in the metadata.
    metadata_text = zipfile.ZipFile(wheel).read(f"{metadata}/METADATA").decode()
    assert any(line in ("License: MIT", "License-Expression: MIT") for line in metadata_text.splitlines())
    assert any(name.endswith("LICENSE") for name in names if name.startswith(metadata))
    assert "Permission is hereby granted, free of charge" in (ROOT / "LICENSE").read_text()
