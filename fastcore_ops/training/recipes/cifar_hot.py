"""ResNet-20 on CIFAR-10, the "Hot" idea at CIFAR scale: the most accuracy, for twice the budget.

Follows ``resnet50_hot`` (MosaicML's Hot column of Table 1 in "Mosaic ResNet Deep Dive"):
everything in ``cifar_medium`` with more regularization for a longer run: label smoothing
0.13, MixUp alpha 0.25, SAM (rho 0.05, CIFAR's value) on every 5th step, RandAugment with
one op per image, stochastic depth 0.05 (half ImageNet's 0.1: ResNet-20's blocks are few
and narrow) and ColOut 0.05; progressive resizing starts at 0.6 of 32 px after a 0.2 delay,
as in Hot. Trains 30 epochs, twice the baseline, with Medium's optimizer and EMA.
``cifar_hot_small`` is its version for 500 images per class.
"""

from fastcore_ops.data import ColOutOptions, RandAugmentOptions
from fastcore_ops.surgery.stochastic_depth import StochasticDepthOptions
from fastcore_ops.training.methods import LabelSmoothingOptions, MixUpOptions
from fastcore_ops.training.recipes import Derived

# Medium's optimizer, the baseline's at 1.5x its LR. At x0.5 (the baseline's 15 epochs) 84.23% on seed 0,
# in 878 s: below the baseline (reports/cifar-full-medium-hot-search-20261126/).
RECIPE = Derived("cifar_medium", {
    "schedule.epochs": 30.0,  # twice the baseline's length
    "methods.stochastic_depth": StochasticDepthOptions(drop_rate=0.05),
    "methods.randaugment": RandAugmentOptions(depth=1, severity=9.0),  # as resnet50_hot
    "methods.colout": ColOutOptions(p_row=0.05, p_col=0.05),
    "methods.progressive_resize.initial_scale": 0.6,
    "methods.progressive_resize.delay_fraction": 0.2,
    "methods.label_smoothing": LabelSmoothingOptions(0.13),
    "methods.mixup": MixUpOptions(alpha=0.25),
    "methods.sam.interval": 5,
})
