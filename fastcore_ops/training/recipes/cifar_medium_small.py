"""``cifar_medium`` sized for 500 images per class (``--subset 500``), for the few-minute demo.

The same methods and 15 epochs, with the subset baseline's optimizer at half its LR (0.4, for
BCE) and EMA's half-life at 25 steps, about 5% of the subset baseline's run. On the subset it
reaches ``cifar_baseline_small``'s full-budget top-1 2.06x faster, 69.9% at its own budget
(``reports/cifar-tradeoff-openmp-20261125/``, 3 seeds).
"""

from fastcore_ops.training.recipes import Derived

RECIPE = Derived("cifar_medium", {
    # Mild's optimizer before Mild's own search, which ran without MixUp, SAM and EMA (they regularize
    # too) and so does not carry over.
    "optimizer.lr": 0.4,
    "methods.ema.half_life_steps": 25,  # two thirds of an epoch at batch 128 on --subset 500 (39 steps per epoch)
})
