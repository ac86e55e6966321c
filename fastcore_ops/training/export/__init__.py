"""A training run's weights out of its checkpoint: ``python -m fastcore_ops.training.export`` writes them as a plain state dict
(:mod:`fastcore_ops.training.export.cli`), and :func:`load_model` rebuilds the model from them.

    >>> from fastcore_ops.training.export import load_model
    >>> model = load_model("exports/mild")   # doctest: +SKIP
"""

__all__ = ["load_model"]


def __getattr__(name: str):
    # Imported on first use: the command's parser (fastcore_ops.training.export.cli) loads without torch.
    if name == "load_model":
        from fastcore_ops.training.export.folder import load_model
        return load_model
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
