"""What a recipe trains to in a few steps, as one hash: the weights, the evaluated model and the metrics.

``recipe_fingerprints.json`` beside this file holds each recipe's, which ``test_recipe_fingerprints.py``
checks. A new recipe records its fingerprint with one command (``--import MODULE`` for a recipe a
module of your own registers; ``--again`` for a recipe recorded before, whose change the commit explains):

    python -m tests.training.recipe_fingerprint NAME ...

A child process computes them (``--data``, as the test starts it), in numerics pinned to code every
x86 machine runs alike: no SIMD dispatch in ATen, MKL in its compatible mode, one thread, and oneDNN
off (:func:`fingerprints`). The same recipe then hashes the same on any machine (the kernels run
their PyTorch reference), so a reshape of the code that changes what a recipe trains is caught bit
for bit. The child's first line names the instruction sets the CPU it ran on offers (an emulated
one's, under qemu); the last holds the fingerprints.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from fastcore_ops import cli
from fastcore_ops.training.plugins import add_import_option, import_modules
from fastcore_ops.training.recipes import list_recipes
from tests.hang_guard import HANG_GUARD_S

# The numerics every machine computes alike, set before this process starts; the kernels run their
# PyTorch reference (the interpreter is far slower, and what it computes is tested elsewhere).
PINNED_ENVIRONMENT = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "OMP_NUM_THREADS": "1",
                      "MKL_NUM_THREADS": "1", "FASTCORE_OPS_INTERPRET": "0", "TRITON_INTERPRET": "0"}

# The file of recorded fingerprints: recipe_fingerprints.json here, or the one this variable names
# (test_toy_recipe.py records its recipe into a copy).
FINGERPRINTS_VARIABLE = "FASTCORE_OPS_RECIPE_FINGERPRINTS"
FINGERPRINTS_FILE = Path(os.environ.get(FINGERPRINTS_VARIABLE) or Path(__file__).with_name("recipe_fingerprints.json"))

# Fields that do not move in a reshape of the methods: few steps, small sizes, fp32, no workers.
_SMALL_IMAGES = ["precision=fp32", "data.batch_size=4", "data.num_workers=0", "data.train_size=32",
                 "data.eval_size=32", "data.eval_resize=32"]
_SMALL_TEXT = ["precision=fp32", "model.options={'n_layer': 1, 'n_head': 2, 'n_embd': 32}", "text.sequence_length=16",
               "text.eval_batch_tokens=256", "text.eval_length_multiples=(1,)", "data.batch_size=8"]
# The run's length, in epochs: the scale schedule shortens every recipe to it, warmup and all.
_EPOCHS = {"image_classification": 2.0, "language_model": 0.5}


def fingerprint(recipe: str, cifar: Path, text: Path, extra: tuple[str, ...] = ()) -> str:
    """12 hex digits of the trained weights (the model's and the evaluated one's) and the final metrics.

    extra: ``--set`` assignments applied last.
    """
    from fastcore_ops.training.assemble import build_trainer
    from fastcore_ops.training.config import override
    from fastcore_ops.training.recipes import get_recipe
    from fastcore_ops.training.tasks.language import prepare_text_data

    base = get_recipe(recipe)
    shorter = f"schedule.scale_schedule_ratio={_EPOCHS[base.task] / base.schedule.epochs!r}"
    if base.task == "language_model":
        config = override(base, [*_SMALL_TEXT, shorter, *extra])
        data = prepare_text_data(config, text, progress=False)
    else:
        config, data = override(base, [*_SMALL_IMAGES, shorter, *extra]), cifar
    with tempfile.TemporaryDirectory() as out:
        trainer = build_trainer(config, data=data, out=Path(out) / "run", device=torch.device("cpu"), progress=False)
        result = trainer.fit()
    digest = hashlib.sha256()
    for module in (trainer.model, trainer.state.eval_model or trainer.model):
        for name, tensor in module.state_dict().items():
            digest.update(name.encode())
            digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    digest.update(json.dumps(result.metrics, sort_keys=True).encode())
    return digest.hexdigest()[:12]


def cpu_instruction_sets() -> dict[str, bool]:
    """Which of the instruction sets that change PyTorch's, MKL's and oneDNN's code this CPU offers."""
    return {"avx2": torch.cpu._is_avx2_supported(), "avx512": torch.cpu._is_avx512_supported(),
            "avx512_bf16": torch.cpu._is_avx512_bf16_supported(), "amx": torch.cpu._is_amx_tile_supported()}


class Child:
    """A child that prints the instruction sets it saw, then what each of its recipes trained to.

    It writes into files of ``folder``, not pipes: a pipe nobody reads while another child is
    waited for would fill and stall it. Its tokens go to a cache of its own there, so children
    running side by side never prepare into the same folder. ``imports``: the modules that
    register recipes outside the package, imported there too.
    """

    def __init__(self, recipes, cifar: Path, text: Path, folder: Path, *, imports=(), extra_environment=(),
                 emulator=()):
        environment = (os.environ | PINNED_ENVIRONMENT | {"FASTCORE_OPS_CACHE": str(folder / "cache")}
                       | dict(extra_environment))
        self.stdout, self.stderr = folder / "stdout", folder / "stderr"
        imported = [argument for module in imports for argument in ("--import", module)]
        with open(self.stdout, "w") as stdout, open(self.stderr, "w") as stderr:
            self.process = subprocess.Popen([*emulator, sys.executable, "-m", __spec__.name, *imported, "--data",
                                             str(cifar), str(text), *recipes], stdout=stdout, stderr=stderr,
                                            env=environment)

    def fingerprints(self) -> tuple[str, dict]:
        """The instruction sets the child saw, and what each of its recipes trained to."""
        self.process.wait(timeout=HANG_GUARD_S)
        assert self.process.returncode == 0, self.stderr.read_text()[-3000:]
        lines = self.stdout.read_text().splitlines()
        return next(line for line in lines if line.startswith("cpu offers:")), json.loads(lines[-1])


def record(recipes: list[str], imports: list[str], again: bool) -> list[str]:
    """Train ``recipes`` in a pinned child on the tests' micro data and write their fingerprints into the file;
    a line for each recipe says what it recorded."""
    from tests.training.conftest import micro_cifar_tree, micro_text_tree  # pytest's: not for the children to import

    saved = json.loads(FINGERPRINTS_FILE.read_text())
    before = [name for name in recipes if name in saved["recipes"]]
    if before and not again:
        raise ValueError(f"{', '.join(before)}: recorded already; to record a deliberate change, add --again and "
                         f"say why in the commit")
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        (folder / "text").mkdir()
        child = Child(recipes, micro_cifar_tree(folder / "cifar"), micro_text_tree(folder / "text"), folder,
                      imports=imports)
        trained = child.fingerprints()[1]
    lines = [f"{name}: {saved['recipes'].get(name, 'new')} -> {trained[name]}" for name in recipes]
    saved["recipes"] = dict(sorted((saved["recipes"] | trained).items()))
    FINGERPRINTS_FILE.write_text(json.dumps(saved, indent=1) + "\n")
    return lines


def build_parser() -> cli.ArgumentParser:
    """The command line of ``python -m tests.training.recipe_fingerprint``."""
    parser = cli.ArgumentParser(prog="python -m tests.training.recipe_fingerprint",
                                description="Record the fingerprints of new recipes in recipe_fingerprints.json.")
    parser.add_argument("recipes", nargs="+", metavar="NAME", help="the recipes to fingerprint")
    parser.add_argument("--again", action="store_true",
                        help="record recipes recorded before too (a deliberate change, explained in the commit)")
    parser.add_argument("--data", nargs=2, type=Path, metavar=("CIFAR", "TEXT"),
                        help="print the fingerprints trained on these folders, in this process: the child the "
                             "test and the recording start, in pinned numerics")
    add_import_option(parser)
    return parser


def fingerprints(recipes: list[str], cifar: Path, text: Path) -> None:
    """Print the instruction sets this CPU offers, then each recipe's fingerprint."""
    # oneDNN off: only the GPT recipes, whose GELU ran in oneDNN even capped at SSE4.1, hashed
    # otherwise on an Intel Xeon (AVX-512, AMX) than on the AMD EPYC that recorded them. Without
    # it, GELU and the convolutions run ATen's own code, pinned above.
    torch.backends.mkldnn.enabled = False
    print("cpu offers:", " ".join(name for name, offered in cpu_instruction_sets().items() if offered))
    print(json.dumps({recipe: fingerprint(recipe, cifar, text) for recipe in recipes}))


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        import_modules(args.imports)
        for name in args.recipes:
            cli.check_name("NAME", name, list_recipes(), "recipe")
        if args.data is None:
            print(*record(args.recipes, args.imports, args.again), sep="\n")
            return 0
    except cli.REFUSALS as error:
        return cli.refuse(error)
    fingerprints(args.recipes, *args.data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
