"""A recipe declared outside the package passes every recipe test, with no other file edited, once the one
command has recorded its fingerprint: the recipe tests and the fingerprint tests find it in the registry.

The recipe is ``tests/training/toy_recipe.py``'s. Each step is a child process that loads that module,
as a user's package is loaded: this process never imports it, so its registry keeps the project's recipes.
The fingerprint goes into a copy of ``recipe_fingerprints.json``.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.hang_guard import run_guarded
from tests.training.recipe_fingerprint import FINGERPRINTS_FILE, FINGERPRINTS_VARIABLE

MODULE, RECIPE = "tests.training.toy_recipe", "toy_cifar_short"
ROOT, HERE = Path(__file__).resolve().parents[2], Path(__file__).resolve().parent


def _run(arguments: list[str], environment: dict) -> subprocess.CompletedProcess:
    return run_guarded([sys.executable, *arguments], cwd=ROOT, env=environment)


def _passed(tests: list[str], environment: dict) -> list[str]:
    """The cases of ``RECIPE`` that pass in a pytest run of ``tests`` that loads ``MODULE``; all others pass too."""
    run = _run(["-m", "pytest", "-v", "-p", MODULE, "-p", "no:cacheprovider", *tests], environment)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return [line.split("::")[1].split()[0] for line in run.stdout.splitlines() if f"[{RECIPE}] PASSED" in line]


def test_a_toy_recipe_passes_every_recipe_test_once_its_fingerprint_is_recorded(tmp_path):
    fingerprints = tmp_path / FINGERPRINTS_FILE.name
    shutil.copy(FINGERPRINTS_FILE, fingerprints)
    environment = os.environ | {FINGERPRINTS_VARIABLE: str(fingerprints)}
    recorded = _run(["-m", "tests.training.recipe_fingerprint", "--import", MODULE, RECIPE], environment)
    assert recorded.returncode == 0, recorded.stderr[-3000:]
    assert recorded.stdout.startswith(f"{RECIPE}: new -> ")
    assert json.loads(fingerprints.read_text())["recipes"].keys() == json.loads(FINGERPRINTS_FILE.read_text())[
        "recipes"].keys() | {RECIPE}
    assert len(_passed([str(HERE / "test_recipes.py")], environment)) >= 3
    assert _passed([str(HERE / "test_recipe_fingerprints.py"), "-k", RECIPE], environment) == [
        f"test_a_recipe_has_a_fingerprint[{RECIPE}]", f"test_a_recipe_trains_to_its_recorded_weights[{RECIPE}]",
        f"test_the_fingerprint_holds_with_the_libraries_forced_to_another_instruction_set[{RECIPE}]"]
