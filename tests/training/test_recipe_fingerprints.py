"""Every recipe trains to the same weights as the code it was measured with, bit for bit, on any x86 CPU.

``recipe_fingerprints.json`` holds what each recipe trained to in a few steps
(:mod:`tests.training.recipe_fingerprint`), recorded before the methods moved into their
registry; a change of the code that changes what a recipe trains fails here. A deliberate change
of a recipe records its new fingerprint with the reason in the commit.

A fingerprint that held on one CPU family only would fail on the next machine, so each is also
checked with the libraries' instruction-set switches forced below this CPU's best, and the
language recipes on an emulated AMD EPYC with AVX2 only.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fastcore_ops.training.recipes import get_recipe, list_recipes
from tests.hang_guard import HANG_GUARD_S
from tests.training.recipe_fingerprint import PINNED_ENVIRONMENT

FINGERPRINTS = json.loads((Path(__file__).parent / "recipe_fingerprints.json").read_text())
RECORDED = FINGERPRINTS["recipes"]

# qemu's name of the CPU the emulated run pretends to be: AMD (MKL picks its code by vendor too),
# AVX2 only, no bf16 units: the family whose arithmetic once differed from the Xeons' here.
EMULATED_CPU = "EPYC-Rome"


class _Child:
    """A child that prints the instruction sets it saw, then what each of its recipes trained to there.

    It writes into files of ``folder``, not pipes: a pipe nobody reads while another child is
    waited for would fill and stall it. Its tokens go to a cache of its own there, so children
    running side by side never prepare into the same folder.
    """

    def __init__(self, recipes, cifar: Path, text: Path, folder: Path, *, extra_environment=(), emulator=()):
        environment = (os.environ | PINNED_ENVIRONMENT | {"FASTCORE_OPS_CACHE": str(folder / "cache")}
                       | dict(extra_environment))
        self.stdout, self.stderr = folder / "stdout", folder / "stderr"
        with open(self.stdout, "w") as stdout, open(self.stderr, "w") as stderr:
            self.process = subprocess.Popen([*emulator, sys.executable, "-m", "tests.training.recipe_fingerprint",
                                             str(cifar), str(text), *recipes], stdout=stdout, stderr=stderr,
                                            env=environment)

    def fingerprints(self) -> tuple[str, dict]:
        """The instruction sets the child saw, and what each of its recipes trained to."""
        self.process.wait(timeout=HANG_GUARD_S)
        assert self.process.returncode == 0, self.stderr.read_text()[-3000:]
        lines = self.stdout.read_text().splitlines()
        return next(line for line in lines if line.startswith("cpu offers:")), json.loads(lines[-1])


def _forced_switches() -> dict[str, str]:
    """Each library's own instruction-set switch, capped below this CPU's best: AVX2 on an AVX-512
    machine, SSE4.2 on an AVX2 one. ATen's dispatch stays pinned to its plain code; the pins must
    make these moot."""
    if torch.cpu._is_avx512_supported():
        return {"MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    return {"MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "ONEDNN_MAX_CPU_ISA": "SSE41"}


LANGUAGE_RECIPES = sorted(name for name in RECORDED if get_recipe(name).task == "language_model")
HAS_QEMU = shutil.which("qemu-x86_64") is not None


@pytest.fixture(scope="module")
def children(micro_cifar, micro_text, tmp_path_factory):
    """Every child of this module, started at once.

    Each trains on one thread, so on a machine of two cores or more they run side by side, and
    the module takes about as long as its slowest child rather than all of them in turn.
    """
    def start(name, recipes, **options):
        return _Child(recipes, micro_cifar, micro_text, tmp_path_factory.mktemp(name), **options)

    started = {"pinned": start("pinned", sorted(RECORDED)),
               "forced": start("forced", sorted(RECORDED), extra_environment=_forced_switches())}
    if HAS_QEMU:
        started["emulated"] = start("emulated", LANGUAGE_RECIPES, emulator=("qemu-x86_64", "-cpu", EMULATED_CPU))
    yield started
    for child in started.values():  # those a failed test never waited for
        child.process.kill()
        child.process.wait()


@pytest.fixture(scope="module")
def trained(children) -> dict:
    """What every recipe trained to, in one child: each child pays for importing torch and the training code."""
    return children["pinned"].fingerprints()[1]


def test_every_recipe_has_a_fingerprint():
    assert sorted(RECORDED) == sorted(list_recipes())


@pytest.mark.parametrize("recipe", sorted(RECORDED))
def test_a_recipe_trains_to_its_recorded_weights(recipe, trained):
    assert trained[recipe] == RECORDED[recipe]


def test_the_fingerprints_hold_with_the_libraries_forced_to_another_instruction_set(children):
    assert children["forced"].fingerprints()[1] == RECORDED


@pytest.mark.skipif(not HAS_QEMU, reason="qemu-user is not installed (apt-get install qemu-user; .ci/run installs it)")
def test_the_language_recipes_train_to_their_weights_on_an_emulated_amd_epyc_with_avx2_only(children):
    # Their optimizer, attention and norms are what differed there. qemu computes the approximate
    # instructions (rsqrt, rcp) exactly, unlike any real CPU, so code that leans on them fails here
    # whatever this machine is. The CNN recipes take over 20 minutes emulated; they trained to their
    # recorded weights on a real AVX2-only AMD EPYC, and run in the forced test above.
    seen, trained = children["emulated"].fingerprints()
    assert seen == "cpu offers: avx2", f"qemu did not emulate an AVX2-only CPU: {seen}"
    assert trained == {name: RECORDED[name] for name in LANGUAGE_RECIPES}
