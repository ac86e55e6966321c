"""``--import MODULE``: the commands load a user's own tasks, models, methods and recipes by importing their module.

A module registers what it defines as it loads (``@register_task``, ``@register_model``,
``@register_method``, ``register_recipe``), so importing it is all a command needs. Only the
command line names modules to import, never a file a command reads (a run's ``config.json``
names its task, and a resume needs the same ``--import``): importing runs the module's code.

    >>> import_modules(["json"])
    >>> import_modules(["no_such_module_here"])
    Traceback (most recent call last):
    ...
    ValueError: --import no_such_module_here: No module named 'no_such_module_here'; ...
"""

from __future__ import annotations

import argparse
import importlib


def add_import_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--import MODULE`` (repeatable) to ``parser``, as ``args.imports``."""
    parser.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                        help="import MODULE (a dotted name on the Python path) first, for the tasks, models, methods "
                             "and recipes it registers; repeatable")


def import_modules(names: list[str]) -> None:
    """Import each module of ``names``; a ValueError names one that cannot be imported and why."""
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as error:
            raise ValueError(f"--import {name}: {error}; name a module on the Python path (the working directory, "
                             f"PYTHONPATH or an installed package), as in: --import my_package.my_task") from error


def import_arguments(names: list[str]) -> list[str]:
    """The command-line arguments that import ``names`` in a child command.

        >>> import_arguments(["my_package.my_task"])
        ['--import', 'my_package.my_task']
    """
    return [argument for name in names for argument in ("--import", name)]
