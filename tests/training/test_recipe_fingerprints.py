"""Every recipe trains to the same weights as the code it was measured with, bit for bit.

``recipe_fingerprints.json`` holds what each recipe trained to in a few steps
(:mod:`tests.training.recipe_fingerprint`), recorded before the methods moved into their
registry; a change of the code that changes what a recipe trains fails here. A deliberate change
of a recipe records its new fingerprint with the reason in the commit.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.training.recipe_fingerprint import PINNED_ENVIRONMENT
from training.recipes import list_recipes

FINGERPRINTS = json.loads((Path(__file__).parent / "recipe_fingerprints.json").read_text())


def test_every_recipe_has_a_fingerprint():
    assert sorted(FINGERPRINTS["recipes"]) == sorted(list_recipes())


@pytest.mark.parametrize("recipe", sorted(FINGERPRINTS["recipes"]))
def test_a_recipe_trains_to_its_recorded_weights(recipe, micro_cifar, micro_text, token_cache):
    environment = os.environ | PINNED_ENVIRONMENT | {"FASTCORE_OPS_CACHE": str(token_cache)}
    run = subprocess.run([sys.executable, "-m", "tests.training.recipe_fingerprint", str(micro_cifar),
                          str(micro_text), recipe], capture_output=True, text=True, env=environment, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads(run.stdout.splitlines()[-1]) == {recipe: FINGERPRINTS["recipes"][recipe]}
