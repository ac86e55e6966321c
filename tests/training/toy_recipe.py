"""A recipe declared here and nowhere else, as a user's own package would: ``cifar_mild_small`` at half its length.

It registers as this module loads. ``test_toy_recipe.py`` records its fingerprint and runs every
recipe test in child processes that load it (``pytest -p tests.training.toy_recipe``): the registry
of the process running the suite keeps the project's own recipes.
"""

from fastcore_ops.training.recipes import Derived, register_recipe

NAME = "toy_cifar_short"

register_recipe(NAME, Derived("cifar_mild_small", {"schedule.epochs": 7.0, "methods.label_smoothing.smoothing": 0.1}))
