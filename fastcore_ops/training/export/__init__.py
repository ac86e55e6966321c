"""A training run's weights out of its checkpoint: ``python -m fastcore_ops.training.export`` writes them as a plain state dict
(:mod:`fastcore_ops.training.export.cli`), and :func:`load_model` rebuilds the model from them.

    >>> from fastcore_ops.training.export import load_model
    >>> model = load_model("exports/mild")   # doctest: +SKIP
"""

from fastcore_ops.training.export.folder import load_model

__all__ = ["load_model"]
