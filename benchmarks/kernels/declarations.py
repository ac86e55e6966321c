"""The table of every kernel's declaration that docs/kernels.md shows: its launch budget, the rival a user
would run, and its goals on a GPU, each read from the kernel's :class:`~benchmarks.kernels.KernelSpec`.

    python -m benchmarks.kernels.declarations   # print the table, to paste over the one in docs/kernels.md

tests/kernels/test_declarations.py fails when the page's table differs from what this prints.

    >>> from benchmarks.kernels.registry import KERNELS
    >>> print(table(KERNELS[:1]))  # doctest: +NORMALIZE_WHITESPACE
    | kernel | launches, at most | rival a user would run | goals on a GPU |
    |---|---|---|---|
    | `blurpool2d` | 1 forward, 1 backward | cuDNN's depthwise convolution with a cached filter | at least 2x cuDNN's
    depthwise convolution; within 1.3x of its bytes at the device's peak bandwidth |
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable

from fastcore_ops import cli

from . import KernelSpec


def table(specs: Iterable[KernelSpec]) -> str:
    """The Markdown table of ``specs``, a row each."""
    lines = ["| kernel | launches, at most | rival a user would run | goals on a GPU |", "|---|---|---|---|"]
    for spec in specs:
        launches = f"{spec.forward_launches} forward, {spec.backward_launches} backward"
        if spec.launches_text:
            launches += f" ({spec.launches_text})"
        goals = "; ".join(goal.text for goal in spec.goals)
        lines.append(f"| `{spec.name}` | {launches} | {spec.rival_text} | {goals} |")
    return "\n".join(lines)


def build_parser() -> cli.ArgumentParser:
    """The command line of ``python -m benchmarks.kernels.declarations``: no options."""
    return cli.ArgumentParser(prog="python -m benchmarks.kernels.declarations", description=cli.description(__doc__))


@cli.command(build_parser)
def main(args: argparse.Namespace) -> None:
    from .registry import KERNELS  # imports every kernel: after the command line is parsed

    print(table(KERNELS))


if __name__ == "__main__":
    sys.exit(main())
