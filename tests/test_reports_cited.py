"""reports/ holds today's evidence: every folder is cited by the documentation, and the index lists each one.

A folder is cited when README.md or a page under docs/ names it, or when a file inside a cited folder does (a
sweep's README naming the search that chose its baseline). reports/README.md is the index of every folder, so
naming a folder there cites nothing; CHANGELOG.md names removed folders, so it cites nothing either.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# A folder per measurement: what-yyyymmdd.
FOLDER = re.compile(r"[a-z0-9][a-z0-9.-]*-\d{8}")


def report_folders(reports: Path) -> list[str]:
    return sorted(path.name for path in reports.iterdir() if path.is_dir())


def root_pages(root: Path) -> list[Path]:
    """The pages a reader starts from: the README and the documentation."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def _text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:  # a plot, a binary result: it names no folder
        return None


def _named(text: str, folders: list[str]) -> set[str]:
    """The folders ``text`` names, whole (``peers-cifar-full-20261127`` is not named by its ``-rerun-`` twin)."""
    return {folder for folder in folders if re.search(rf"(?<![\w.-]){re.escape(folder)}(?![\w-])", text)}


def cited_folders(root: Path) -> dict[str, Path]:
    """Each folder of ``root/reports`` that the root pages cite, directly or through cited folders: the first file
    found citing it."""
    reports = root / "reports"
    folders = report_folders(reports)
    cited: dict[str, Path] = {}
    for page in root_pages(root):
        for folder in sorted(_named(page.read_text(encoding="utf-8"), folders)):
            cited.setdefault(folder, page)
    pending = list(cited)
    while pending:
        folder = pending.pop()
        for path in sorted((reports / folder).rglob("*")):
            text = _text(path) if path.is_file() else None
            for named in sorted(_named(text or "", folders) - cited.keys()):
                cited[named] = path
                pending.append(named)
    return cited


def orphans(root: Path) -> list[str]:
    return sorted(set(report_folders(root / "reports")) - cited_folders(root).keys())


def indexed_folders(index: str) -> list[str]:
    """The folders the index's table rows name, in its order: ``| `name/` | backs | at | command |``."""
    return re.findall(r"^\| `([^`/]+)/` \|", index, flags=re.MULTILINE)


def test_every_report_folder_is_cited_by_the_documentation():
    uncited = orphans(ROOT)
    assert uncited == [], (
        f"reports/ folders that neither README.md, a page of docs/ nor a cited folder names: {uncited}. "
        "Each is evidence for something the documentation states today, or it goes: cite it from the page that "
        "states what it shows (docs/results.md for a measured figure), in a sentence saying what it shows; or, if "
        "it is superseded, `git rm -r` it, drop its row from reports/README.md and name it, with why, in "
        "CHANGELOG.md's newest section")


def test_the_citation_check_finds_an_uncited_folder_and_one_cited_only_by_an_uncited_folder(tmp_path):
    reports = tmp_path / "reports"
    for folder in ("sweep-20260101", "search-20260101", "old-20260101", "older-20260101", "listed-20260101",
                   "mild-20260101"):
        (reports / folder).mkdir(parents=True)
    (tmp_path / "docs" / "methods").mkdir(parents=True)
    (tmp_path / "README.md").write_text("Mild is 2x faster (`reports/sweep-20260101/`).\n")
    (tmp_path / "docs" / "results.md").write_text("no report here\n")
    (reports / "sweep-20260101" / "README.md").write_text("Against the baseline of ../search-20260101/.\n"
                                                          "Not `cifar-mild-20260101/`, which is gone.\n")
    (reports / "sweep-20260101" / "curves.png").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    (reports / "old-20260101" / "README.md").write_text("Before: older-20260101/.\n")
    (reports / "README.md").write_text("| `listed-20260101/` | backs nothing |\n")  # the index cites nothing
    assert orphans(tmp_path) == ["listed-20260101", "mild-20260101", "old-20260101", "older-20260101"]

    (tmp_path / "docs" / "methods" / "ema.md").write_text("Its row: `reports/old-20260101/`.\n")
    assert orphans(tmp_path) == ["listed-20260101", "mild-20260101"]  # older-20260101 through old-20260101


def test_the_index_lists_every_folder_once():
    index = (ROOT / "reports" / "README.md").read_text(encoding="utf-8")
    listed = indexed_folders(index)
    present = report_folders(ROOT / "reports")
    assert sorted(set(listed)) == sorted(listed), f"listed twice in reports/README.md: " \
        f"{sorted({name for name in listed if listed.count(name) > 1})}"
    assert sorted(set(present) - set(listed)) == [], "folders reports/README.md's tables leave out (add a row)"
    assert sorted(set(listed) - set(present)) == [], "rows of reports/README.md for folders that are gone"


def test_every_report_the_documentation_names_exists():
    """A removed folder is named in CHANGELOG.md only; a page naming one would send its reader nowhere."""
    present = set(report_folders(ROOT / "reports"))
    missing = {f"{page.relative_to(ROOT)}: {name}" for page in root_pages(ROOT)
               for name in re.findall(rf"reports/({FOLDER.pattern})", page.read_text(encoding="utf-8"))
               if name not in present}
    assert sorted(missing) == []
