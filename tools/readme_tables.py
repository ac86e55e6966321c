"""Keep the README's measured tables identical to the committed reports they come from.

A table in the README sits between two markers naming its file under the repository:

    <!-- table: reports/<folder>/speedups.md -->
    ...the file's content, copied here by this script...
    <!-- /table -->

    python tools/readme_tables.py           # copy every named file into its block
    python tools/readme_tables.py --check   # exit 1 naming each block that differs from its file
    python tools/readme_tables.py docs/cost-pass.md --root .   # a page under docs/, its paths from the root

The test suite runs the check, so a README figure cannot drift from the report behind it.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: the command line is the project's

from fastcore_ops import cli  # noqa: E402

BLOCK = re.compile(r"(<!-- table: (?P<path>[^ ]+) -->\n)(?P<body>.*?)(<!-- /table -->)", re.DOTALL)
# Either marker, as written or not: each opening one must read OPEN, and be closed before the next one opens.
MARKER = re.compile(r"<!-- table: |<!-- /table -->")
OPEN = re.compile(r"<!-- table: (?P<path>\S+) -->\n")


def _line(text: str, position: int) -> int:
    return text.count("\n", 0, position) + 1


def _check_markers(readme: str) -> None:
    """ValueError naming the first marker out of place: one malformed, one never closed, or a close with no opening.

    Example:
        >>> _check_markers("<!-- table: a.md -->\\nold\\n")
        Traceback (most recent call last):
        ...
        ValueError: line 1: '<!-- table: a.md -->' has no '<!-- /table -->' after it; close the block, ...
    """
    opened = None
    for match in MARKER.finditer(readme):
        line = _line(readme, match.start())
        if match[0] == "<!-- /table -->":
            if opened is None:
                raise ValueError(f"line {line}: '<!-- /table -->' closes no '<!-- table: FILE -->' marker; "
                                 f"remove it, or open its block above it")
            opened = None
            continue
        if opened is not None:
            raise ValueError(f"line {opened[0]}: '{opened[1]}' has no '<!-- /table -->' after it; close the block, "
                             f"or remove the marker")
        marker = OPEN.match(readme, match.start())
        if marker is None:
            shown = readme[match.start():].split("\n", 1)[0]
            raise ValueError(f"line {line}: {shown!r} is not a marker this script reads; write it as "
                             f"'<!-- table: FILE -->' on a line of its own, FILE without spaces")
        opened = (line, marker[0].rstrip("\n"))
    if opened is not None:
        raise ValueError(f"line {opened[0]}: '{opened[1]}' has no '<!-- /table -->' after it; close the block, "
                         f"or remove the marker")


def _source(root: Path, relative: str) -> str:
    """The text of the file a marker names, ``relative`` to ``root``; ValueError for one that is missing, is not UTF-8
    text, or is outside ``root`` (its real path judged, so a link out of it is refused)."""
    marker = f"'<!-- table: {relative} -->'"
    path = (root / relative).resolve()
    if not path.is_relative_to(root.resolve()):
        raise ValueError(f"{marker} points outside the repository ({root}), to {path}; name a file under it")
    if not path.is_file():
        raise ValueError(f"{marker}: no such file under {root}; commit the report or fix the marker")
    return _text(path, f"{marker}: {relative}", "name a Markdown file")


def _text(path: Path, name: str, fix: str) -> str:
    """``path``'s UTF-8 text; ValueError starting with ``name`` when it is not UTF-8 (``fix`` says what to do) or
    cannot be read."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"{name}: not UTF-8 text (byte {error.start}); {fix}") from None
    except OSError as error:
        raise ValueError(f"{name}: cannot be read ({error.strerror}); fix its permissions") from None


def _block_source(readme: str, root: Path, match: re.Match) -> str:
    """:func:`_source` of a block's marker, its errors naming the marker's line."""
    try:
        return _source(root, match["path"])
    except ValueError as error:
        raise ValueError(f"line {_line(readme, match.start())}: {error}") from None


def filled(readme: str, root: Path) -> str:
    """The README text with every table block replaced by its file's current content.

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> _ = (root / "t.md").write_text("new\\n")
        >>> filled("<!-- table: t.md -->\\nold\\n<!-- /table -->", root)
        '<!-- table: t.md -->\\nnew\\n<!-- /table -->'
    """
    _check_markers(readme)
    return BLOCK.sub(lambda match: match[1] + _block_source(readme, root, match) + match[4], readme)


def stale_tables(readme: str, root: Path) -> list[str]:
    """The files whose README block differs from the file (empty when the README is up to date)."""
    _check_markers(readme)
    return [match["path"] for match in BLOCK.finditer(readme) if match["body"] != _block_source(readme, root, match)]


def _read(readme: Path) -> str:
    """The README's text; ValueError naming it when it is missing, not a file, unreadable or not UTF-8."""
    if not readme.is_file():
        what = "no such file" if not readme.exists() else "not a file"
        raise ValueError(f"{readme}: {what}; pass the Markdown file whose tables to fill or check")
    return _text(readme, str(readme), "save it as UTF-8")


def build_parser() -> cli.ArgumentParser:
    """The command line of ``python tools/readme_tables.py``."""
    parser = cli.ArgumentParser(prog="python tools/readme_tables.py", description=cli.description(__doc__))
    cli.machine_default(parser.add_argument("readme", nargs="?", type=Path, default=ROOT / "README.md",
                                            help="the Markdown file whose tables to fill or check (default: the "
                                                 "repository's README.md)"))
    parser.add_argument("--root", type=Path, help="the folder the markers' paths start from (default: the README's)")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a table is out of date")
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        text = _read(args.readme)
        if args.root is not None and not args.root.is_dir():
            raise ValueError(f"--root {args.root}: no such folder; pass the folder the markers' paths start from")
        root = args.root.resolve() if args.root else args.readme.resolve().parent
        try:
            if args.check:
                stale = stale_tables(text, root)
            else:
                new_text = filled(text, root)
        except ValueError as error:  # a marker's fault: name the README it is in
            raise ValueError(f"{args.readme}: {error}") from None
        if args.check:
            for path in stale:
                print(f"{args.readme}: the table from {path} differs from the file; run python tools/readme_tables.py",
                      file=sys.stderr)
            return 1 if stale else 0
        if new_text != text:
            args.readme.write_text(new_text, encoding="utf-8")
    except cli.REFUSALS as error:
        return cli.refuse(error)
    return 0


if __name__ == "__main__":
    sys.exit(main())
