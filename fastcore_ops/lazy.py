"""A package's public names imported on first use (PEP 562), so that importing the package costs nothing.

The kernels, surgeries, data loader and tradeoff analysis import torch; their packages name them
here instead of importing them, and a command that only parses its command line never loads them.

    >>> __all__, __getattr__ = lazy_exports("fastcore_ops.training.tradeoff", {"curves": ["CurvePoint"]})
    >>> __all__, __getattr__("CurvePoint").__name__
    (['CurvePoint'], 'CurvePoint')
"""

from __future__ import annotations

import importlib
from collections.abc import Callable


def lazy_exports(package: str, public: dict[str, list[str]],
                 modules: tuple[str, ...] = ()) -> tuple[list[str], Callable[[str], object]]:
    """(``__all__``, the module ``__getattr__``) of ``package``, whose submodule ``public``'s keys each define the
    names listed, and whose submodules ``modules`` are public names themselves."""
    module_of = {name: module for module, names in public.items() for name in names}

    def __getattr__(name: str):
        if name in module_of:
            return getattr(importlib.import_module(f"{package}.{module_of[name]}"), name)
        if name in modules:
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return sorted([*module_of, *modules]), __getattr__
