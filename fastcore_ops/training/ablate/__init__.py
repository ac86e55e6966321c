"""``python -m fastcore_ops.training.ablate``: each method's effect against a base recipe (see :mod:`fastcore_ops.training.ablate.cli`)."""
