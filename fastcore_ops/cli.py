"""The exit contract every command of the project keeps: a refusal is one ``error:`` line on stderr and exit 2.

Bad input of any kind (an unknown flag, a value out of range, a missing folder, a damaged
file) is refused before the command writes anything, so the corrected command finds its
output folder as it was.

    >>> parser = ArgumentParser(prog="python -m tool")
    >>> _ = parser.add_argument("--batch", type=positive_int)
    >>> parser.parse_args(["--batch", "0"])
    Traceback (most recent call last):
    ...
    ValueError: argument --batch: invalid positive_int value: '0'; see python -m tool --help
"""

from __future__ import annotations

import argparse
import math
import sys

import torch

from fastcore_ops import checks

# What bad input raises anywhere in the project (fastcore_ops.checks' rule, plus files that
# cannot be read or written): a command refuses these; anything else is a bug and keeps its traceback.
REFUSALS = (ValueError, TypeError, OSError)


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser, raising ValueError for a command line it cannot parse (an unknown flag, a word
    where a number goes) instead of printing its usage, so the command refuses it as any other bad input."""

    def error(self, message):
        raise ValueError(f"{message}; see {self.prog} --help")


def error_line(error: BaseException | str) -> str:
    """The one line that states ``error``; for an error re-raised from a DataLoader worker, its original message.

        >>> error_line(ValueError("Caught ValueError in DataLoader worker process 0.\\nOriginal Traceback "
        ...                       "(most recent call last):\\n  File ...\\nValueError: label 12 is out of range"))
        'error: label 12 is out of range'
    """
    text = str(error)
    lines = [line.strip() for line in text.splitlines() if line.strip()] or [type(error).__name__]
    if "Original Traceback" in text:
        return f"error: {lines[-1].partition(': ')[2] or lines[-1]}"
    return "error: " + " ".join(lines)


def refuse(error: BaseException | str) -> int:
    """Print ``error`` as the command's one ``error:`` line on stderr; the exit status of bad input, 2."""
    print(error_line(error), file=sys.stderr)
    return 2


def positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1.

    >>> positive_int("3")
    3
    """
    value = int(text)
    if value < 1:
        raise ValueError(f"{value} < 1")
    return value


def finite_float(text: str) -> float:
    """An argparse type: a number that is neither inf nor NaN (1e999 overflows to inf, so it is refused too).

    >>> finite_float("0.5")
    0.5
    """
    value = float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def check_device(name: str) -> torch.device:
    """The device that ``--device name`` names; ValueError for a name torch does not know or a CUDA device
    this machine lacks.

    >>> check_device("cpu")
    device(type='cpu')
    """
    return checks.check_device("--device", name)
