"""Evaluate a finished cifar_record run's final weights with flip TTA and with airbench94's.

The runs in this folder were trained at 76aaa17, when cifar_record averaged flipped views' probabilities;
airbench94's multi-crop evaluation (flips and two diagonal 1 px shifts, logits averaged) landed after.
TTA changes no training step, so the final weights are judged again here both ways, the first as a check
that it reproduces the run's own figure. Writes one JSON line.

    .venv/bin/python reports/cifar-record-accuracy-20261202/evaluate_tta.py RUN_FOLDER [DATA]
"""

import dataclasses
import json
import sys
from pathlib import Path

import torch

from fastcore_ops.training import checkpoint
from fastcore_ops.training.assemble import build_trainer
from fastcore_ops.training.config import load_config, override
from fastcore_ops.training.recipes import get_recipe

# Each TTA the final weights are judged with: the recipe's before airbench94's landed, and airbench94's.
TTAS = {"flips_probabilities": {"flip": True, "translate": 0},
        "airbench94": dataclasses.asdict(get_recipe("cifar_record").methods.tta)}


def main(run: Path, data: Path) -> dict:
    """The run's final metrics as saved, and as each of TTAS judges its final weights (its own configuration)."""
    trained = load_config(run / "config.json")
    payload = checkpoint.load(run / "checkpoint.pt", checkpoint.RUN_LAYOUT)
    results = {"run": run.name, "seed": trained.seed, "final_in_checkpoint": payload["final"]}
    for name, tta in TTAS.items():
        config = override(trained, [f"methods.tta={tta!r}"])
        trainer = build_trainer(config, data=data, out=None, device=torch.device("cpu"), progress=False)
        trainer.model.load_state_dict(payload["model"])
        results[name] = trainer.evaluate()
    return results


if __name__ == "__main__":
    default_data = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "cifar10-jpeg"
    print(json.dumps(main(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else default_data)))
