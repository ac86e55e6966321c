"""``python -m training.ablate``: each method's effect against a base recipe (see :mod:`training.ablate.cli`)."""
