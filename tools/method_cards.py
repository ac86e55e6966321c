"""Write docs/methods/: one card per method, built from the code and the committed measurements.

Each card is the "Method card" section of the docstring of the module that implements the method
(what it does, when it helps, what it costs, its options and defaults), how to turn it on (the
``--set`` values ``python -m fastcore_ops.training.ablate`` tries, from its catalog), and what each committed
ablation measured for it (newest first: the record's beside ResNet-20's), row by row from its ``ablation.csv``. The methods are the registry's
(:mod:`fastcore_ops.training.methods.registry`), each card in the module it registered from. Nothing is
written by hand twice.

    python tools/method_cards.py           # write every card and the index
    python tools/method_cards.py --check   # exit 1 naming each card that differs from its sources

The test suite runs the check, so a card cannot drift from the code or the measurement.
"""

from __future__ import annotations

import argparse
import ast
import functools
import csv
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: the catalog is the project's own

from fastcore_ops import cli  # noqa: E402

CARDS_FOLDER = ROOT / "docs" / "methods"


@dataclass(frozen=True)
class Ablation:
    """A committed ablation's table, and its report's title: what it measured, against which base, where."""

    csv: Path
    title: str


DATED_FOLDER = re.compile(r"-(\d{8})$")  # reports/<what>-<yyyymmdd>/


@functools.cache  # read once: every card asks
def committed_ablations(reports: Path = ROOT / "reports") -> list[Ablation]:
    """Every ablation committed under ``reports`` (a folder holding ``ablation.csv``), newest first by the date its
    folder's name ends with; its title is its README's first line, without the heading mark and the time."""
    found = []
    for table in reports.glob("*/ablation.csv"):
        readme = table.parent / "README.md"
        title = readme.read_text().splitlines()[0] if readme.is_file() else table.parent.name
        found.append(Ablation(table, re.sub(r"\s*\([^()]*\)\s*$", "", title.lstrip("# ").strip())))
    return sorted(found, key=lambda ablation: (_folder_date(ablation.csv.parent), ablation.csv.parent.name),
                  reverse=True)


def _folder_date(folder: Path) -> str:
    """The yyyymmdd a report folder's name ends with; "" (oldest) for one without."""
    match = DATED_FOLDER.search(folder.name)
    return match[1] if match else ""


FIELD = re.compile(r"^    (?P<label>[A-Z][^:]*): (?P<text>.*)$")  # "    What: ...", a field of the card


@dataclass(frozen=True)
class CardSource:
    """Where a card comes from: a module's docstring (and the card's name there, when the module holds
    several), and how to turn the thing on."""

    module: str
    section: str = ""
    turn_on: str = ""


def _method_source(method) -> CardSource:
    """A registered method's card: in the module it registered from; turned on as the ablation does."""
    from fastcore_ops.training.ablate.catalog import METHODS
    from fastcore_ops.training.config import TrainConfig

    module = method.module.replace(".", "/") + ".py"
    if method.name in METHODS:
        _, assignments = METHODS[method.name].toggle(TrainConfig(task=method.task_names()[0]))
        return CardSource(module, turn_on=" ".join(f'--set "{value}"' for value in assignments))
    return CardSource(module, turn_on=f'--set "methods.{method.name}={{}}"')


@functools.cache  # the registry imports every method, and torch: once the command line parsed
def sources() -> dict[str, CardSource]:
    """Every registered method's card, then the cards of settings that are not methods."""
    from fastcore_ops.training.methods.registry import all_methods

    return {method.name: _method_source(method) for method in all_methods()} | {
        "lamb_lars": CardSource("fastcore_ops/training/optim.py", "lamb_lars",
                                turn_on="--set optimizer.name=lamb (or lars)"),
        "gradient_clipping": CardSource("fastcore_ops/training/optim.py", "gradient_clipping",
                                        turn_on="--set optimizer.grad_clip_norm=1.0"),
        "scale_schedule": CardSource("fastcore_ops/training/assemble.py", "scale_schedule", turn_on="--budget 0.5"),
    }


def card_section(source: CardSource) -> tuple[str, list[tuple[str, str]]]:
    """The card's one line and its (label, text) fields, in order. The one line is the module docstring's first,
    or where the module holds several cards (``source.section``), the first sentence of the card's "What"."""
    path = ROOT / source.module
    docstring = ast.get_docstring(ast.parse(path.read_text()))
    if not docstring:
        raise ValueError(f"{source.module} has no module docstring to take a method card from")
    header = f"Method card: {source.section}" if source.section else "Method card"
    lines = docstring.splitlines()
    if header not in lines:
        raise ValueError(f"{source.module}: no {header!r} line in its docstring; write the card there")
    fields: list[tuple[str, str]] = []
    for line in lines[lines.index(header) + 1:]:
        if not line.startswith("    ") or line.lstrip().startswith(">>>"):
            break
        match = FIELD.match(line)
        if match:
            fields.append((match["label"], match["text"]))
        elif fields:
            fields[-1] = (fields[-1][0], f"{fields[-1][1]} {line.strip()}")
    if not source.section:
        return lines[0], fields
    what = dict(fields).get("What")
    if not what:
        raise ValueError(f"{source.module}: the card {source.section!r} has no 'What:' field to take its line from")
    sentence = re.split(r"(?<=[.;])\s", what, maxsplit=1)[0].rstrip(".;")
    return sentence[0].upper() + sentence[1:] + ".", fields


def measured_rows(name: str) -> list[tuple[Ablation, list[dict[str, str]]]]:
    """Every committed ablation that measured ``name``, newest first, each with its rows of the variants that add or
    remove it."""
    found = []
    for ablation in committed_ablations():
        with open(ablation.csv, newline="") as file:
            rows = [row for row in csv.DictReader(file) if re.search(rf"[+-]{re.escape(name)}$", row["variant"])]
        if rows:
            found.append((ablation, rows))
    return found


def _measured_text(name: str) -> str:
    measured = measured_rows(name)
    if not measured:
        folders = ", ".join(f"`{a.csv.parent.relative_to(ROOT)}/`" for a in committed_ablations())
        return f"Not in the committed ablations ({folders})."
    return "\n\n".join(_ablation_lines(ablation, rows) for ablation, rows in measured)


def _ablation_lines(ablation: Ablation, rows: list[dict[str, str]]) -> str:
    """One ablation's rows for a method, in words: the quality change per seed, the change with TTA where the table
    has it, the time per step and any speedup."""
    header = list(rows[0])
    quality = header[3]
    # Named, not placed: newer ablations add a column per added metric (the change with TTA) after "per seed".
    with_tta = next((column for column in header if column.startswith(f"{quality.split(' change')[0]} change with")),
                    None)
    speedup_column = next(column for column in header if column.startswith("speedup at the base's"))
    lines = [f"From `{ablation.csv.relative_to(ROOT)}` ({ablation.title}; per seed, paired with the base's run of "
             f"the same seed):", ""]
    for row in rows:
        tta = f"; {with_tta} {row[with_tta]}" if with_tta and row[with_tta] else ""
        speedup = f"; {row[speedup_column]}" if row[speedup_column] else ""
        lines.append(f"- {row['variant']} at {row['budget']} on {row['machine']}: {quality} {row[quality]} "
                     f"(per seed {row['per seed']}){tta}; time per step {row['time per step change (%)']}%{speedup}")
    return "\n".join(lines)


def where_it_runs(name: str) -> str:
    """Where the augmentation ``name`` runs and its order, from the one registry of augmentations; "" for another method.

        >>> where_it_runs("alternating_flip")
        'the decoder, order 5'
    """
    from fastcore_ops.data.transforms.registry import augmentations

    places = {"decoder": "the decoder", "batch": "the loader's batch stage", "step": "the training step"}
    return next((f"{places[entry.runs_in]}, order {entry.order}" for entry in augmentations() if entry.name == name), "")


def render(name: str) -> str:
    """The Markdown card of method ``name``."""
    source = sources()[name]
    title, fields = card_section(source)
    where = where_it_runs(name)
    if where:
        fields = [*fields, ("Runs in", f"{where} (`fastcore_ops/data/transforms/registry.py`: one scale, lower first).")]
    body = "\n\n".join(f"**{label}.** {text}" for label, text in fields)
    return (f"# {name}\n\n{title}\n\n{body}\n\n**Turn it on**: `{source.turn_on}`\n\n"
            f"**Measured effect.** {_measured_text(name)}\n\n"
            f"*Written by `tools/method_cards.py` from `{source.module}`; edit the card there.*\n")


def render_index() -> str:
    lines = ["# Methods", "", "One card per method, written by `tools/method_cards.py` from the code and the committed "
             "measurements.", ""]
    for name, source in sources().items():
        where = where_it_runs(name)
        lines.append(f"- [{name}]({name}.md){f' ({where})' if where else ''}: {card_section(source)[0]}")
    return "\n".join(lines) + "\n"


def expected_files() -> dict[Path, str]:
    files = {CARDS_FOLDER / f"{name}.md": render(name) for name in sources()}
    files[CARDS_FOLDER / "README.md"] = render_index()
    return files


def build_parser() -> cli.ArgumentParser:
    """The command line of ``python tools/method_cards.py``."""
    parser = cli.ArgumentParser(prog="python tools/method_cards.py", description=cli.description(__doc__))
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 naming each stale card")
    return parser


@cli.command(build_parser)
def main(args: argparse.Namespace) -> int:
    files = expected_files()
    if args.check:
        stale = [path for path, text in files.items() if not path.is_file() or path.read_text() != text]
        for path in stale:
            print(f"{path.relative_to(ROOT)} differs from its sources; run python tools/method_cards.py", file=sys.stderr)
        return 1 if stale else 0
    CARDS_FOLDER.mkdir(parents=True, exist_ok=True)
    for path, text in files.items():
        path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
