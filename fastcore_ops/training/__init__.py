"""Training: the trainer, the methods, the recipes and the models that are not in torchvision.

:func:`fit` trains a recipe from Python as ``python -m fastcore_ops.training.train`` does from a shell::

    from fastcore_ops.training import fit
    result = fit("cifar_mild_small", data="data/cifar10-jpeg", out="runs/mild", subset=500)
"""

from fastcore_ops.lazy import lazy_exports

# `fit` on first use: it brings in every part of the trainer, which a submodule such as
# fastcore_ops.training.config does not need.
__all__, __getattr__ = lazy_exports(__name__, {"train": ["fit"]})
