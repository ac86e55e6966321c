"""The options the sweep commands share (``python -m fastcore_ops.training.tradeoff`` and ``.ablate``: the seeds, the
cost pass's), light to import: their parsers are built without torch; and what the tradeoff tool makes of
``--baseline`` and ``--out``.

    >>> parser = cli.ArgumentParser(prog="sweep")
    >>> add_seed_options(parser, seeds=2)
    >>> args = parser.parse_args([])
    >>> list(range(args.first_seed, args.first_seed + args.seeds))
    [3, 4]
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from pathlib import Path

from fastcore_ops import cli
from fastcore_ops.owned_folder import claim_folder

# The first seed no recipe's search used: every CIFAR search ran on seeds 0 and 1
# (reports/cifar-full-baseline-search-20261125/), the GPT baseline's on 0, 1 and 2
# (reports/gpt-baseline-stability-20261125/). A measurement on seeds from here on is held out.
FIRST_UNSEARCHED_SEED = 3


def budget_list(text: str) -> list[float]:
    """An argparse type: comma-separated scale-schedule ratios, finite numbers > 0, each given once.

    Example:
        >>> budget_list("0.25,1,2")
        [0.25, 1.0, 2.0]
    """
    budgets = []
    for item in text.split(","):
        try:
            budget = float(item)
        except ValueError:
            budget = math.nan
        if not (math.isfinite(budget) and budget > 0):
            raise argparse.ArgumentTypeError(f"{item.strip()!r} is not a budget; accepted: comma-separated "
                                             f"scale-schedule ratios > 0, e.g. 0.25,0.5,1,2")
        budgets.append(budget)
    if len(set(budgets)) != len(budgets):
        raise argparse.ArgumentTypeError(f"{text!r}: a budget is given twice; give each once")
    return budgets


def add_seed_options(parser: argparse.ArgumentParser, *, seeds: int, first_seed: int = FIRST_UNSEARCHED_SEED) -> None:
    """``--seeds`` (how many, ``seeds`` by default) and ``--first-seed``, as every sweep command takes them."""
    parser.add_argument("--seeds", type=cli.positive_int, default=seeds, help="seeds per curve and budget")
    parser.add_argument("--first-seed", type=cli.non_negative_int, default=first_seed,
                        help=f"the first seed: the runs use seeds FIRST to FIRST+N-1; from {FIRST_UNSEARCHED_SEED} on, "
                             f"no recipe's search used them, so a measurement that reports a gain runs on them")


COST_ONLY = {"times": "--times", "rounds": "--rounds", "threads": "--threads"}  # argument name -> flag


def add_cost_options(parser: argparse.ArgumentParser, *, report: str) -> None:
    """``--cost`` and the flags that go with it alone (:data:`COST_ONLY`), as both sweep commands take them;
    ``report`` names what the cost pass writes on the modelled times ("the ablation report")."""
    parser.add_argument("--cost", nargs="+", type=Path, metavar="FOLDER",
                        help=f"time every kind of step these folders' runs took, on this machine with nothing else "
                             f"running, and write {report} on the modelled times (needs the runs' --data)")
    parser.add_argument("--times", type=Path, metavar="COSTS_JSON",
                        help="with --cost: take the step times from an earlier cost pass's costs.json instead of "
                             "timing them")
    parser.add_argument("--rounds", type=cli.positive_int,
                        help="with --cost: how many times each window of steps is timed (default: 3)")
    parser.add_argument("--threads", type=cli.positive_int,
                        help="with --cost on a CPU: PyTorch's threads (default: as python -m fastcore_ops.training.train "
                             "chooses); time with the threads the runs trained with")


def cost_only_flags(args: argparse.Namespace) -> list[str]:
    """The flags of :data:`COST_ONLY` that ``args`` gives, which a command refuses without ``--cost``.

    Example:
        >>> cost_only_flags(argparse.Namespace(times=None, rounds=2, threads=None))
        ['--rounds']
    """
    return [flag for name, flag in COST_ONLY.items() if getattr(args, name) is not None]


def choose_baseline(requested: str | None, recipes: Sequence[str]) -> str:
    """The recipe the others are compared with: ``requested`` (``--baseline``) when it is among ``recipes``, else
    the first recipe whose name holds "baseline", else the first recipe; ValueError for one not among them.

    Example:
        >>> choose_baseline(None, ["cifar_mild", "cifar_baseline"])
        'cifar_baseline'
    """
    if requested is None:
        return next((name for name in recipes if "baseline" in name), recipes[0])
    return cli.check_name("--baseline", requested, recipes, "recipe among those compared")


def claim_out(out: Path, tool: str) -> None:
    """Create ``out`` if needed and mark it as ``tool``'s (:mod:`fastcore_ops.owned_folder`): a command's last
    check, as it writes; ValueError when the folder is not the tool's to write into or cannot be marked.

    Example:
        >>> claim_out(out / "mine", "tradeoff")
        >>> sorted(path.name for path in (out / "mine").iterdir())
        ['.fastcore_ops-tradeoff']
    """
    try:
        claim_folder(out, tool)
    except ValueError as error:
        raise ValueError(f"--out {error}") from None
    except OSError as error:
        raise ValueError(f"--out {out} cannot be created or marked ({error.strerror or error}); "
                         f"pass a folder you can write to") from None
