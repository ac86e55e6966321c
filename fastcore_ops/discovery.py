"""How every registry finds what registers in it: each module of its package is imported, and registers as it loads.

The tasks, the batch transforms, the recipes, the surgeries and the training methods all find their
entries this one way (the recipes import a module when it is used, so that a command's parser can
list their names before torch loads: :func:`package_modules`). Two were possible: a hand-kept list of imports, or importing whatever modules
the package holds. The second is the rule, for two reasons. A newcomer's whole change is one file:
a new surgery, task or method is its own module and nothing else names it. And nothing can leave a
registry silently incomplete: a module that fails as it loads raises here, for every registry
that reads the package, where a list that forgot a module (or wrapped its import in a ``try``)
would quietly run without it; a file that can never be imported as a module (``my-method.py``,
``my.method.py``) is refused by name, not skipped.

    >>> import_package_modules("fastcore_ops.surgery")[:3]
    ['alibi', 'blurpool', 'channels_last']
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from pathlib import Path


def package_modules(package: str) -> list[str]:
    """The names of ``package``'s modules (a dotted name), sorted, without importing them; ImportError names a file
    that cannot be a module. The recipes list themselves this way, so that a command's parser can name them
    before torch loads; each is imported when it is used.

        >>> "cifar_mild" in package_modules("fastcore_ops.training.recipes")
        True
    """
    folders = importlib.import_module(package).__path__
    names = [info.name for info in pkgutil.iter_modules(folders)]
    # pkgutil skips a file whose name has a dot in it; that file would be missing from the registry unseen.
    files = {path.stem for folder in folders for path in Path(folder).glob("*.py")} - {"__init__"}
    strangers = sorted(name for name in {*names, *files} if not name.isidentifier())
    if strangers:
        raise ImportError(f"{package}: {', '.join(f'{name}.py' for name in strangers)} cannot be imported as a module "
                          f"(a module's name is a Python identifier), so what it defines would never register; "
                          f"rename it")
    return sorted(names)


@functools.cache  # a package's modules are imported once; a failure is not cached, so it raises on every call
def _imported(package: str) -> tuple[str, ...]:
    names = package_modules(package)
    for name in names:
        importlib.import_module(f"{package}.{name}")
    return tuple(names)


def import_package_modules(package: str) -> list[str]:
    """Import every module of ``package`` (a dotted name), sorted by name; the names, without the package's.

    The error of a module that fails as it loads propagates; ImportError names a file that cannot be a module.
    """
    return list(_imported(package))
