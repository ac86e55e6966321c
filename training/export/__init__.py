"""A training run's weights out of its checkpoint: ``python -m training.export`` writes them as a plain state dict
(:mod:`training.export.cli`), and :func:`load_model` rebuilds the model from them.

    >>> from training.export import load_model
    >>> model = load_model("exports/mild")   # doctest: +SKIP
"""

from training.export.folder import load_model

__all__ = ["load_model"]
