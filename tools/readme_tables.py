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


def _source(root: Path, relative: str) -> str:
    path = (root / relative).resolve()
    if not path.is_relative_to(root.resolve()):
        raise ValueError(f"README table {relative!r} points outside the repository; name a file under it")
    if not path.is_file():
        raise FileNotFoundError(f"README table {relative!r}: no such file; commit the report or fix the marker")
    return path.read_text()


def filled(readme: str, root: Path) -> str:
    """The README text with every table block replaced by its file's current content.

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> _ = (root / "t.md").write_text("new\\n")
        >>> filled("<!-- table: t.md -->\\nold\\n<!-- /table -->", root)
        '<!-- table: t.md -->\\nnew\\n<!-- /table -->'
    """
    if readme.count("<!-- table: ") != readme.count("<!-- /table -->"):
        raise ValueError("README: a '<!-- table: FILE -->' marker has no '<!-- /table -->' after it, or the reverse")
    return BLOCK.sub(lambda match: match[1] + _source(root, match["path"]) + match[4], readme)


def stale_tables(readme: str, root: Path) -> list[str]:
    """The files whose README block differs from the file (empty when the README is up to date)."""
    return [match["path"] for match in BLOCK.finditer(readme) if match["body"] != _source(root, match["path"])]


def build_parser() -> cli.ArgumentParser:
    """The command line of ``python tools/readme_tables.py``."""
    parser = cli.ArgumentParser(prog="python tools/readme_tables.py", description=cli.description(__doc__))
    parser.add_argument("readme", nargs="?", type=Path, default=ROOT / "README.md",
                        help="the Markdown file whose tables to fill or check")
    parser.add_argument("--root", type=Path, help="the folder the markers' paths start from (default: the README's)")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a table is out of date")
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except ValueError as error:
        return cli.refuse(error)
    text = args.readme.read_text()
    root = args.root.resolve() if args.root else args.readme.resolve().parent
    if args.check:
        stale = stale_tables(text, root)
        for path in stale:
            print(f"{args.readme}: the table from {path} differs from the file; run python tools/readme_tables.py",
                  file=sys.stderr)
        return 1 if stale else 0
    args.readme.write_text(filled(text, root))
    return 0


if __name__ == "__main__":
    sys.exit(main())
