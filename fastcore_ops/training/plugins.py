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

A module that is found but fails as it loads (it raises, or has a syntax error) is refused too: the
ValueError names the module, its error and the line it came from, and says that the environment
variable ``FASTCORE_OPS_TRACEBACK=1`` prints the module's own traceback (on stderr, before the
command's ``error:`` line).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback

from fastcore_ops import cli

# The environment variable that prints the traceback of a module that failed as it was imported.
TRACEBACK_VARIABLE = "FASTCORE_OPS_TRACEBACK"


def add_import_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--import MODULE`` (repeatable) to ``parser``, as ``args.imports``."""
    parser.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                        help="import MODULE (a dotted name on the Python path) first, for the tasks, models, methods "
                             "and recipes it registers; repeatable")


def import_modules(names: list[str]) -> None:
    """Import each module of ``names``; a ValueError names one that cannot be imported and why."""
    for name in names:
        shown = cli.shown(name)
        if not name or name.startswith("."):  # importlib's ValueError or TypeError, not the module's
            raise ValueError(f"--import {shown}: not a module name (an absolute, dotted one); name a module on the "
                             f"Python path, as in: --import my_package.my_task")
        try:
            importlib.import_module(name)
        except ImportError as error:
            if _not_found(error, name):
                raise ValueError(f"--import {shown}: {error}; name a module on the Python path (the working "
                                 f"directory, PYTHONPATH or an installed package), as in: --import "
                                 f"my_package.my_task") from error
            raise _failed(shown, error) from error
        except Exception as error:  # the module's own code raised, or it does not compile
            raise _failed(shown, error) from error


def _not_found(error: ImportError, name: str) -> bool:
    """Whether ``error`` says that ``name`` itself (or a package it is in) is missing, not something it imports."""
    missing = getattr(error, "name", None)
    return isinstance(error, ModuleNotFoundError) and missing is not None and (
        name == missing or name.startswith(f"{missing}."))


def _failed(shown: str, error: Exception) -> ValueError:
    """The refusal of a module that was found but failed as it was imported; prints its traceback when asked."""
    if os.environ.get(TRACEBACK_VARIABLE, "") not in ("", "0"):
        if os.environ.get("RANK", "0") == "0":  # under torchrun, once: rank 0 prints the error line too
            tb = error.__traceback__  # from the module's own frames, not this one's or importlib's
            while tb is not None and (tb.tb_frame.f_code.co_filename in (__file__, importlib.__file__)
                                      or tb.tb_frame.f_code.co_filename.startswith("<frozen importlib")):
                tb = tb.tb_next
            traceback.print_exception(type(error), error, tb, file=sys.stderr)
        ask = f"its traceback is above ({TRACEBACK_VARIABLE} is set)"
    else:
        ask = f"rerun with {TRACEBACK_VARIABLE}=1 to see its traceback"
    if isinstance(error, SyntaxError):
        what, where = error.msg, f"line {error.lineno} of {error.filename}"
    else:
        what = str(error)
        # The deepest line run as a module's top level: the line of the module (or of one it imports) that failed.
        frames = [frame for frame in traceback.extract_tb(error.__traceback__)
                  if frame.name == "<module>" and not frame.filename.startswith("<")]
        where = f"line {frames[-1].lineno} of {frames[-1].filename}" if frames else ""
    said = f"{type(error).__name__}: {what}" if what else type(error).__name__
    return ValueError(f"--import {shown}: importing it raised {said}{f' ({where})' if where else ''}; fix the "
                      f"module, or leave out --import {shown}; {ask}")


def import_arguments(names: list[str]) -> list[str]:
    """The command-line arguments that import ``names`` in a child command.

        >>> import_arguments(["my_package.my_task"])
        ['--import', 'my_package.my_task']
    """
    return [argument for name in names for argument in ("--import", name)]
