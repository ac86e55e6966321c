"""``cifar_hot`` sized for 500 images per class (``--subset 500``), for the few-minute demo.

The same methods and 30 epochs, with ``cifar_medium_small``'s optimizer and EMA. On the subset,
at half its budget (the baseline's 15 epochs), it reaches 65.4%, below
``cifar_baseline_small``'s 66.2% (``reports/cifar-tradeoff-openmp-20261125/``, 3 seeds): its
augmentations cost accuracy at these lengths (``reports/ablation-cifar-flips-20261124/``).
"""

from fastcore_ops.training.recipes import Derived

RECIPE = Derived("cifar_hot", {"optimizer.lr": 0.4, "methods.ema.half_life_steps": 25})  # as cifar_medium_small
