"""What a recipe trains to in a few steps, as one hash: the weights, the evaluated model and the metrics.

Run as a child process by ``test_recipe_fingerprints.py``, in numerics pinned to code every x86
machine runs alike: no SIMD dispatch in ATen, MKL in its compatible mode, one thread, and oneDNN
off (:func:`main`). The same recipe then hashes the same on any machine (the kernels run their
PyTorch reference), so a reshape of the code that changes what a recipe trains is caught bit for
bit. Its first line names the instruction sets the CPU it ran on offers (an emulated one's, under
qemu); the last holds the fingerprints.

    python -m tests.training.recipe_fingerprint <cifar folder> <text folder> <recipe> ...
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

import torch

# The numerics every machine computes alike, set before this process starts; the kernels run their
# PyTorch reference (the interpreter is far slower, and what it computes is tested elsewhere).
PINNED_ENVIRONMENT = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "OMP_NUM_THREADS": "1",
                      "MKL_NUM_THREADS": "1", "FASTCORE_OPS_INTERPRET": "0", "TRITON_INTERPRET": "0"}

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


def main(argv: list[str]) -> None:
    # oneDNN off: only the GPT recipes, whose GELU ran in oneDNN even capped at SSE4.1, hashed
    # otherwise on an Intel Xeon (AVX-512, AMX) than on the AMD EPYC that recorded them. Without
    # it, GELU and the convolutions run ATen's own code, pinned above.
    torch.backends.mkldnn.enabled = False
    cifar, text, *recipes = argv
    print("cpu offers:", " ".join(name for name, offered in cpu_instruction_sets().items() if offered))
    print(json.dumps({recipe: fingerprint(recipe, Path(cifar), Path(text)) for recipe in recipes}))


if __name__ == "__main__":
    main(sys.argv[1:])
