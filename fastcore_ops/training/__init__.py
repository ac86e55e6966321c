"""Training: the trainer, the methods, the recipes and the models that are not in torchvision.

:func:`fit` trains a recipe from Python as ``python -m fastcore_ops.training.train`` does from a shell::

    from fastcore_ops.training import fit
    result = fit("cifar_mild_small", data="data/cifar10-jpeg", out="runs/mild", subset=500)
"""


def __getattr__(name: str):
    # Imported on first use: `fit` brings in every part of the trainer, which a submodule such as
    # fastcore_ops.training.config does not need.
    if name == "fit":
        from fastcore_ops.training.train import fit
        return fit
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["fit"]
