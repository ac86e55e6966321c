"""Names the docstring examples of training.tradeoff use: a small made-up sweep and a folder to write to."""

import pytest

from training.tradeoff.results import RunRecord


def _record(recipe: str, budget: float, seed: int, seconds: float, top1: float) -> RunRecord:
    return RunRecord.made_up(recipe, budget, seed, quality=top1, seconds=seconds, machine="laptop/cpu",
                             metrics={"eval_loss": 1.0}, phases={"forward": seconds / 3, "backward": seconds / 2})


# Two seeds of a baseline and of a recipe that reaches the same top-1 in less time.
SWEEP = [_record("cifar_baseline", budget, seed, seconds, top1 + seed / 100)
         for budget, seconds, top1 in ((0.5, 100.0, 0.50), (1.0, 200.0, 0.60)) for seed in (0, 1)] + \
        [_record("cifar_mild", budget, seed, seconds, top1 + seed / 100)
         for budget, seconds, top1 in ((0.5, 50.0, 0.52), (1.0, 100.0, 0.62)) for seed in (0, 1)]


@pytest.fixture(autouse=True)
def _tradeoff_examples(doctest_namespace, tmp_path):
    doctest_namespace.update(records=list(SWEEP), out=tmp_path)
