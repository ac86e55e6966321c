"""Names the docstring examples of training.tradeoff use: a small made-up sweep and a folder to write to."""

import pytest

from training.tradeoff.metric import TOP1
from training.tradeoff.results import RunRecord


def _record(recipe: str, budget: float, seed: int, seconds: float, top1: float) -> RunRecord:
    return RunRecord(machine="laptop/cpu", recipe=recipe, budget=budget, seed=seed, metric=TOP1.name,
                     higher_is_better=TOP1.higher_is_better, metric_label=TOP1.label,
                     metrics={"top1": top1, "eval_loss": 1.0}, train_seconds=seconds, first_epoch_seconds=seconds / 10,
                     samples_per_second=200.0, sample_unit="images", steps=100, config_hash="0123456789ab",
                     phase_seconds={"forward": seconds / 3, "backward": seconds / 2})


# Two seeds of a baseline and of a recipe that reaches the same top-1 in less time.
SWEEP = [_record("cifar_baseline", budget, seed, seconds, top1 + seed / 100)
         for budget, seconds, top1 in ((0.5, 100.0, 0.50), (1.0, 200.0, 0.60)) for seed in (0, 1)] + \
        [_record("cifar_mild", budget, seed, seconds, top1 + seed / 100)
         for budget, seconds, top1 in ((0.5, 50.0, 0.52), (1.0, 100.0, 0.62)) for seed in (0, 1)]


@pytest.fixture(autouse=True)
def _tradeoff_examples(doctest_namespace, tmp_path):
    doctest_namespace.update(records=list(SWEEP), out=tmp_path)
