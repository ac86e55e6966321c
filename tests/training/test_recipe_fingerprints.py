"""Every recipe trains to the same weights as the code it was measured with, bit for bit, on any x86 CPU.

``recipe_fingerprints.json`` holds what each recipe of the registry trained to in a few steps
(:mod:`tests.training.recipe_fingerprint`, whose command records a new recipe's), first recorded
before the methods moved into their registry; a change of the code that changes what a recipe
trains fails here. A deliberate change of a recipe records its new fingerprint with the reason in
the commit. ``-k NAME`` trains and checks one recipe.

A fingerprint that held on one CPU family only would fail on the next machine, so each is also
checked with the libraries' instruction-set switches forced below this CPU's best, and the
language recipes on an emulated AMD EPYC with AVX2 only.
"""

import json
import shutil

import pytest
import torch

from fastcore_ops.training.recipes import get_recipe, list_recipes
from tests.training.recipe_fingerprint import FINGERPRINTS_FILE, Child

RECORDED = json.loads(FINGERPRINTS_FILE.read_text())["recipes"]
# Every recipe of the registry, those a module loaded with pytest's -p registers too (test_toy_recipe.py's).
RECIPES = list_recipes()

# qemu's name of the CPU the emulated run pretends to be: AMD (MKL picks its code by vendor too),
# AVX2 only, no bf16 units: the family whose arithmetic once differed from the Xeons' here.
EMULATED_CPU = "EPYC-Rome"


def _forced_switches() -> dict[str, str]:
    """Each library's own instruction-set switch, capped below this CPU's best: AVX2 on an AVX-512
    machine, SSE4.2 on an AVX2 one. ATen's dispatch stays pinned to its plain code; the pins must
    make these moot."""
    if torch.cpu._is_avx512_supported():
        return {"MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    return {"MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "ONEDNN_MAX_CPU_ISA": "SSE41"}


LANGUAGE_RECIPES = [name for name in RECIPES if get_recipe(name).task == "language_model"]
HAS_QEMU = shutil.which("qemu-x86_64") is not None


def _selected(session, test) -> list[str]:
    """The recipes of ``test``'s cases this session runs (``-k NAME`` runs one recipe's)."""
    return sorted({item.callspec.params["recipe"] for item in session.items
                   if getattr(item, "originalname", None) == test.__name__})


@pytest.fixture(scope="module")
def children(request, micro_cifar, micro_text, tmp_path_factory):
    """Every child of this module, started at once, each training the recipes of the cases selected.

    Each trains on one thread, so on a machine of two cores or more they run side by side, and
    the module takes about as long as its slowest child rather than all of them in turn. Each
    imports the modules this session loaded with -p, for the recipes they register.
    """
    imports = [name for name in request.config.option.plugins or () if not name.startswith("no:")]

    def start(name, test, **options):
        recipes = _selected(request.session, test)
        return recipes and Child(recipes, micro_cifar, micro_text, tmp_path_factory.mktemp(name), imports=imports,
                                 **options)

    forced = test_the_fingerprint_holds_with_the_libraries_forced_to_another_instruction_set
    started = {"pinned": start("pinned", test_a_recipe_trains_to_its_recorded_weights),
               "forced": start("forced", forced, extra_environment=_forced_switches())}
    if HAS_QEMU:
        started["emulated"] = start("emulated", test_a_language_recipe_trains_to_its_weights_on_an_emulated_amd_epyc,
                                    emulator=("qemu-x86_64", "-cpu", EMULATED_CPU))
    started = {name: child for name, child in started.items() if child}
    yield started
    for child in started.values():  # those a failed test never waited for
        child.process.kill()
        child.process.wait()
@pytest.mark.parametrize("recipe", RECIPES)
def test_a_recipe_has_a_fingerprint(recipe):
    assert recipe in RECORDED, (f"recipe {recipe} has no fingerprint; record it with python -m "
                                f"tests.training.recipe_fingerprint {recipe} (see that module)")


@pytest.mark.parametrize("recipe", RECIPES)
def test_a_recipe_trains_to_its_recorded_weights(recipe, children):
    assert children["pinned"].fingerprints()[1][recipe] == RECORDED.get(recipe)


@pytest.mark.parametrize("recipe", RECIPES)
def test_the_fingerprint_holds_with_the_libraries_forced_to_another_instruction_set(recipe, children):
    assert children["forced"].fingerprints()[1][recipe] == RECORDED.get(recipe)


@pytest.mark.skipif(not HAS_QEMU, reason="qemu-user is not installed (apt-get install qemu-user; .ci/run installs it)")
@pytest.mark.parametrize("recipe", LANGUAGE_RECIPES)
def test_a_language_recipe_trains_to_its_weights_on_an_emulated_amd_epyc(recipe, children):
    # Their optimizer, attention and norms are what differed there: AVX2 only, no bf16 units. qemu
    # computes the approximate instructions (rsqrt, rcp) exactly, unlike any real CPU, so code that
    # leans on them fails here whatever this machine is. The CNN recipes take over 20 minutes
    # emulated; they trained to their recorded weights on a real AVX2-only AMD EPYC, and run in the
    # forced test above.
    seen, trained = children["emulated"].fingerprints()
    assert seen == "cpu offers: avx2", f"qemu did not emulate an AVX2-only CPU: {seen}"
    assert trained[recipe] == RECORDED.get(recipe)
