"""Names the docstring examples of training.ablate use: a made-up ablation of two seeds."""

import pytest

from training.tradeoff.results import RunRecord


def _record(variant: str, seed: int, seconds: float, top1: float) -> RunRecord:
    return RunRecord.made_up(variant, 1.0, seed, quality=top1, seconds=seconds, machine="laptop/cpu",
                             metrics={"top1_tta": top1 + 0.01})


# Cutout gains 1 and 2 points of top-1 on the two seeds, at 5% more time per step.
ABLATION = [_record("cifar_baseline", seed, 200.0, 0.60 + seed / 100) for seed in (0, 1)] + \
           [_record("cifar_baseline+cutout", seed, 210.0, 0.61 + 2 * seed / 100) for seed in (0, 1)]


@pytest.fixture(autouse=True)
def _ablation_examples(doctest_namespace, tmp_path):
    doctest_namespace.update(records=list(ABLATION), out=tmp_path)
