"""What every command of the project shares: its exit contract, its help's form and its common options.

A refusal is one ``error:`` line on stderr and exit 2. Bad input of any kind (an unknown flag, a
value out of range, a missing folder, a damaged file, a mistyped name) is refused before the
command writes anything, so the corrected command finds its output folder as it was. Every
option has help text showing its default; the options every command may take are spelled one
way (``--batch-size``, ``--device``, ``--out``, ``--no-progress``, ``--seed``) and the shared
ones are added here, so their help reads the same everywhere.

A concept is spelled one way in every command too: a recipe is ``--recipe``, a budget (the
scale-schedule ratio that stretches every schedule) ``--budget``, a method ``--method``; a flag
that takes a comma-separated list of them is the plural (``--recipes``, ``--budgets``,
``--methods``), and only such a flag. A spelling a command took before (:data:`RENAMED`) is
refused, naming the one to use. Where a command writes is never a default: its ``--out`` is
required, so no command writes where it was not told to.

Parsing imports nothing heavy (no torch, triton or numpy): a command builds its parser from light
modules and imports its machinery after parsing, so ``--help`` and a refused command line answer
at once; a default that needs torch to be known (``--device``'s) is computed once parsing is done.

    >>> parser = ArgumentParser(prog="python -m tool")
    >>> _ = parser.add_argument("--batch-size", type=positive_int)
    >>> parser.parse_args(["--batch-size", "0"])
    Traceback (most recent call last):
    ...
    ValueError: argument --batch-size: must be a whole number >= 1, got '0'; see python -m tool --help
"""

from __future__ import annotations

import argparse
import difflib
import math
import re
import sys
import functools
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from fastcore_ops.owned_folder import check_claimable

if TYPE_CHECKING:  # torch is imported where a device is checked: parsing needs none of it
    import torch

# What bad input raises anywhere in the project (fastcore_ops.checks' rule, plus files that
# cannot be read or written): a command refuses these; anything else is a bug and keeps its traceback.
REFUSALS = (ValueError, TypeError, OSError)


# Flags renamed so that each concept has one spelling (see above): the old one, and the one it is now.
RENAMED = {"--base": "--recipe", "--scale-schedule": "--budget"}

# The help text of the shared options, one wording for every command.
DEVICE_HELP = "where to compute: cpu, cuda or cuda:N (default: cuda where this machine has it, else cpu)"
NO_PROGRESS_HELP = "no progress bars (for logs)"


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """argparse's help with each option's default appended, where there is one to show: not for a flag
    (False), an option whose help says what leaving it out does (None), or a repeatable one (an empty list)."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or action.default == [] or \
                getattr(action, "machine_default", False):
            return action.help
        return super()._get_help_string(action)


class AfterParsing:
    """A default only known by asking torch (whether this machine has CUDA): :class:`ArgumentParser` computes it
    once the command line is parsed, so that --help and a refused command line do not import torch.

        >>> parser = ArgumentParser(prog="tool")
        >>> _ = parser.add_argument("--size", default=AfterParsing(lambda: 3))
        >>> parser.parse_args([]).size
        3
    """

    def __init__(self, compute):
        self.compute = compute


def machine_default(action: argparse.Action) -> argparse.Action:
    """Mark ``action``'s default as this machine's or this checkout's (a device, an absolute path): --help then
    shows the rule its help text states, not the value the default has here.

        >>> parser = ArgumentParser(prog="tool")
        >>> _ = machine_default(parser.add_argument("--where", default="/home/me/x", help="x (default: beside y)"))
        >>> "/home/me" in parser.format_help()
        False
    """
    action.machine_default = True
    return action


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser, raising ValueError for a command line it cannot parse (an unknown flag, a word
    where a number goes) instead of printing its usage, so the command refuses it as any other bad input.
    Its help shows every option's default (:class:`HelpFormatter`)."""

    def __init__(self, *args, formatter_class=HelpFormatter, **kwargs):
        super().__init__(*args, formatter_class=formatter_class, **kwargs)
        if is_console_script(sys.argv[0]):  # fastcore-train: its usage and errors name what the user typed
            self.prog = Path(sys.argv[0]).name

    def parse_known_args(self, args=None, namespace=None):
        args = sys.argv[1:] if args is None else list(args)
        for word in args:
            flag = word.partition("=")[0]
            if RENAMED.get(flag) in self._option_string_actions and flag not in self._option_string_actions:
                self.error(f"{flag} is now {RENAMED[flag]}")
        parsed, rest = super().parse_known_args(args, namespace)
        if not rest:  # parse_args refuses the rest: no default needs computing then
            for action in self._actions:
                if isinstance(action.default, AfterParsing) and getattr(parsed, action.dest, None) is action.default:
                    setattr(parsed, action.dest, action.default.compute())
        return parsed, rest

    def error(self, message):
        raise ValueError(f"{message}; see {self.prog} --help")


def is_console_script(program: str) -> bool:
    """Whether ``program`` (``sys.argv[0]``) is one of the package's console scripts (pyproject.toml).

        >>> is_console_script("/venv/bin/fastcore-train"), is_console_script("/repo/fastcore_ops/training/train.py")
        (True, False)
    """
    return Path(program).name.startswith("fastcore-")


# reST markup in a docstring: ``code``, and :role:`target` (with Sphinx's ~ for "the last part only").
_MARKUP = re.compile(r"``(.+?)``|:[a-z]+:`~?(.+?)`")
# A docstring's opening "``python -m tool``: ", which the usage line of --help already shows.
_COMMAND_PREFIX = re.compile(r"^``[^`]+``:\s*")


def plain_text(text: str) -> str:
    """``text`` without reST markup: a double-backticked name or a Sphinx role's target becomes the bare name.

        >>> plain_text("run ``python -m fastcore_ops.training.train``, see :mod:`fastcore_ops.training.config`")
        'run python -m fastcore_ops.training.train, see fastcore_ops.training.config'
    """
    return _MARKUP.sub(lambda match: match.group(1) or match.group(2), text)


def description(docstring: str) -> str:
    """A command's --help description from its module docstring: the first paragraph, as plain text on one
    line, without the command's name that opens it (the usage line shows it).

        >>> description("``python -m fastcore_ops.training.train``: train a ``recipe``.\\n\\nMore.")
        'Train a recipe.'
    """
    first = " ".join(docstring.strip().split("\n\n")[0].split())
    text = plain_text(_COMMAND_PREFIX.sub("", first))
    return text[:1].upper() + text[1:]


def add_device_option(parser: argparse.ArgumentParser) -> None:
    """``--device``, as every command that computes takes it: a device this machine has, by name."""
    machine_default(parser.add_argument("--device", type=device_name, default=AfterParsing(_default_device),
                                        help=DEVICE_HELP))


def _default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def add_no_progress_option(parser: argparse.ArgumentParser) -> None:
    """``--no-progress``, as every command that draws progress bars takes it."""
    parser.add_argument("--no-progress", action="store_true", help=NO_PROGRESS_HELP)


def closest(name: str, known: Iterable[str], listing: str = "known") -> str:
    """What to say of a ``name`` that is not among ``known``: the closest known names (difflib's), or, when
    none is close, all of them after ``listing``.

        >>> closest("cifar_mlid", ["cifar_hot", "cifar_mild"])
        'did you mean cifar_mild?'
        >>> closest("resnet", ["alibi", "sam"])
        'known: alibi, sam'
    """
    known = list(known)
    close = nearest(name, known)
    if not close:
        return f"{listing}: {', '.join(known)}"
    names = close[0] if len(close) == 1 else f"{', '.join(close[:-1])} or {close[-1]}"
    return f"did you mean {names}?"


def nearest(name: str, known: list[str]) -> list[str]:
    """Up to three of ``known`` close to ``name`` (difflib's ratio at least 0.7), best first, and within 0.1 of
    the best: of recipes that share a prefix, only those as close as the best one.

        >>> nearest("cifar_mlid", ["cifar_hot", "cifar_medium", "cifar_mild"])
        ['cifar_mild']
    """
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.7)
    ratios = [difflib.SequenceMatcher(None, match, name).ratio() for match in close]
    return [match for match, ratio in zip(close, ratios) if ratio >= ratios[0] - 0.1]


def shown(name: str) -> str:
    """``name`` as an error line shows it: as it is, or quoted where it is empty, has spaces around it or
    characters that do not print.

        >>> shown("cifar_mild"), shown(" x"), shown("")
        ('cifar_mild', "' x'", "''")
    """
    return name if name and name.isprintable() and name.strip() == name else repr(name)


def check_name(flag: str, name: str, known: Iterable[str], kind: str) -> str:
    """``name`` when it is among ``known``; else ValueError naming ``flag`` and the closest known names.
    ``kind`` words the error ("recipe", "method").

        >>> check_name("--recipe", "cifar_mlid", ["cifar_hot", "cifar_mild"], "recipe")
        Traceback (most recent call last):
        ...
        ValueError: --recipe cifar_mlid: no such recipe; did you mean cifar_mild?
    """
    known = list(known)
    if name not in known:
        raise ValueError(f"{flag} {shown(name)}: no such {kind}; {closest(name, known)}")
    return name


def check_names(flag: str, text: str, known: Iterable[str], kind: str) -> list[str]:
    """The names in the comma-separated ``text``, each among ``known`` (see :func:`check_name`) and given once.

        >>> check_names("--methods", "cutout, mixup", ["cutout", "ema", "mixup"], "method")
        ['cutout', 'mixup']
    """
    known = list(known)
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise ValueError(f"{flag} {text!r}: no {kind} named; give comma-separated names from {', '.join(known)}")
    for name in names:
        check_name(flag, name, known, kind)
    if len(set(names)) != len(names):
        raise ValueError(f"{flag} {text!r}: a {kind} is named twice; name each once")
    return names


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


def command(build_parser: Callable[[], argparse.ArgumentParser],
            check: Callable[[argparse.Namespace], None] | None = None,
            ) -> Callable[[Callable[[argparse.Namespace], int | None]], Callable[[list[str] | None], int]]:
    """Make a command's ``main(argv) -> exit status`` from its parser and the decorated ``run(args)``.

    The command line is parsed, then ``check(args)`` checks what the parser cannot (it may complete
    ``args``, importing what it needs, and writes nothing); what either raises of :data:`REFUSALS` is
    refused (exit 2, one ``error:`` line) before ``run`` starts. ``run`` imports the command's
    machinery and does the work; it returns the exit status, or None for 0. A refusal that only the
    work can find is the work's to make.

        >>> def build_parser():
        ...     parser = ArgumentParser(prog="python -m tool")
        ...     parser.add_argument("--times", type=positive_int, default=1)
        ...     return parser
        >>> @command(build_parser)
        ... def main(args):
        ...     print(" ".join(["ran"] * args.times))
        >>> main(["--times", "2"])
        ran ran
        0
        >>> main(["--times", "0"])  # stderr: error: argument --times: must be a whole number >= 1, got '0'; ...
        2
    """

    def make_main(run: Callable[[argparse.Namespace], int | None]) -> Callable[[list[str] | None], int]:
        @functools.wraps(run)
        def main(argv: list[str] | None = None) -> int:
            try:
                args = build_parser().parse_args(argv)
                if check is not None:
                    check(args)
            except REFUSALS as error:
                return refuse(error)
            status = run(args)
            return 0 if status is None else status

        return main

    return make_main


def claimable_folder(tool: str) -> Callable[[str], Path]:
    """The type of an ``--out`` that ``tool`` writes into: refused while parsing unless it is new, empty, or
    ``tool``'s own (:func:`fastcore_ops.owned_folder.check_claimable`); nothing is written.

        >>> parser = ArgumentParser(prog="python -m tool")
        >>> _ = parser.add_argument("--out", type=claimable_folder("benchmarks"))
        >>> parser.parse_args(["--out", "/no/such/folder"]).out
        PosixPath('/no/such/folder')
    """

    def folder(text: str) -> Path:
        try:
            check_claimable(text, tool)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
        return Path(text)

    return folder


def positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1.

    >>> positive_int("3")
    3
    """
    return _whole_number(text, low=1)


def non_negative_int(text: str) -> int:
    """An argparse type: a whole number >= 0.

    >>> non_negative_int("0")
    0
    """
    return _whole_number(text, low=0)


def _whole_number(text: str, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < low:
        raise argparse.ArgumentTypeError(f"must be a whole number >= {low}, got {text!r}")
    return value


def finite_float(text: str) -> float:
    """An argparse type: a number that is neither inf nor NaN (1e999 overflows to inf, so it is refused too).

    >>> finite_float("0.5")
    0.5
    """
    return _finite_number(text, above=None)


def positive_float(text: str) -> float:
    """An argparse type: a finite number > 0.

    >>> positive_float("9.9")
    9.9
    """
    return _finite_number(text, above=0.0)


def _finite_number(text: str, above: float | None) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    if above is not None and value <= above:
        raise argparse.ArgumentTypeError(f"must be a number > {above:g}, got {text!r}")
    return value


def device_name(text: str) -> str:
    """An argparse type: the name of a CPU or CUDA device this machine has, as torch spells it.

    >>> device_name("cpu")
    'cpu'
    """
    from fastcore_ops import checks  # torch: only once a device is named

    try:
        return str(checks.check_device("device", text))
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error).removeprefix("device ")) from None


def check_device(name: str) -> torch.device:
    """The device that ``--device name`` names; ValueError for a name torch does not know or a CUDA device
    this machine lacks.

    >>> check_device("cpu")
    device(type='cpu')
    """
    from fastcore_ops import checks

    return checks.check_device("--device", name)
