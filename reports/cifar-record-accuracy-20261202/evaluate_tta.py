"""Evaluate a finished cifar_record run's final weights with the TTA it trained with and with airbench94's.

The runs in this folder were trained at 76aaa17, when cifar_record averaged flipped views' probabilities;
airbench94's multi-crop evaluation (flips and two diagonal 1 px shifts, logits averaged) landed after.
TTA changes no training step, so the final weights are judged again here both ways, the first as a check
that it reproduces the run's own figure. Writes one JSON line.

    .venv/bin/python reports/cifar-record-accuracy-20261202/evaluate_tta.py RUN_FOLDER [DATA]
"""

import json
import sys
from pathlib import Path

import torch

from fastcore_ops.training import checkpoint
from fastcore_ops.training.assemble import build_trainer
from fastcore_ops.training.config import override
from fastcore_ops.training.recipes import get_recipe

TTAS = {"flips_probabilities": ["methods.tta={'flip': True, 'translate': 0}"], "airbench94": []}


def main(run: Path, data: Path) -> dict:
    seed = json.loads((run / "config.json").read_text())["seed"]
    payload = checkpoint.load(run / "checkpoint.pt", checkpoint.RUN_LAYOUT)
    results = {"run": run.name, "seed": seed, "final_in_checkpoint": payload["final"]}
    for name, assignments in TTAS.items():
        config = override(get_recipe("cifar_record"), [f"seed={seed}", *assignments])
        trainer = build_trainer(config, data=data, out=None, device=torch.device("cpu"), progress=False)
        trainer.model.load_state_dict(payload["model"])
        results[name] = trainer.evaluate()
    return results


if __name__ == "__main__":
    default_data = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "cifar10-jpeg"
    print(json.dumps(main(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else default_data)))
