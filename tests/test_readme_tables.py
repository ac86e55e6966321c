"""The README's measured tables are the committed reports' own files, word for word."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.tool_module import load_tool

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "readme_tables.py"


readme_tables = load_tool("readme_tables")


def test_every_readme_table_matches_the_report_file_it_names():
    readme = (ROOT / "README.md").read_text()
    assert "<!-- table: reports/" in readme, "the README should take its measured tables from reports/"
    assert readme_tables.stale_tables(readme, ROOT) == []


def test_every_table_in_the_docs_matches_the_report_file_it_names():
    pages = [path for path in (ROOT / "docs").glob("*.md") if "<!-- table: " in path.read_text()]
    assert pages, "docs/cost-pass.md takes its validation table from reports/"
    for page in pages:
        assert readme_tables.stale_tables(page.read_text(), ROOT) == [], page


def test_filling_copies_each_file_into_its_block_and_check_then_passes(tmp_path):
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "a.md").write_text("| x |\n|---|\n| 1 |\n")
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- table: reports/a.md -->\nstale\n<!-- /table -->\nend\n")
    check = [sys.executable, str(SCRIPT), str(readme), "--check"]
    stale = subprocess.run(check, capture_output=True, text=True)
    assert stale.returncode == 1 and "reports/a.md" in stale.stderr
    assert readme_tables.main([str(readme)]) == 0
    assert readme.read_text() == "intro\n<!-- table: reports/a.md -->\n| x |\n|---|\n| 1 |\n<!-- /table -->\nend\n"
    assert subprocess.run(check).returncode == 0


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*"))
            if path.is_file() and not path.is_symlink()}


# A README's text (None: no README), and what its one error line says beside the README's name.
BAD_READMES = {
    "no-README": (None, "no such file; pass the Markdown file"),
    "not-UTF-8": (b"\xff\xfe<!-- table: reports/a.md -->\n", "not UTF-8 text (byte 0)"),
    "never-closed": (b"<!-- table: reports/a.md -->\nno end marker\n",
                     "line 1: '<!-- table: reports/a.md -->' has no '<!-- /table -->'"),
    "opened-twice": (b"<!-- table: reports/a.md -->\n<!-- table: reports/a.md -->\nx\n<!-- /table -->\n",
                     "line 1: '<!-- table: reports/a.md -->' has no '<!-- /table -->'"),
    "closed-unopened": (b"intro\n<!-- /table -->\n", "line 2: '<!-- /table -->' closes no"),
    "malformed": (b"<!-- table: reports/a b.md -->\nx\n<!-- /table -->\n", "is not a marker this script reads"),
    "missing-file": (b"<!-- table: reports/missing.md -->\nx\n<!-- /table -->\n",
                     "line 1: '<!-- table: reports/missing.md -->': no such file"),
    "folder": (b"<!-- table: reports -->\nx\n<!-- /table -->\n", "'<!-- table: reports -->': no such file"),
    "dot-dot": (b"<!-- table: ../outside.md -->\nx\n<!-- /table -->\n",
                "'<!-- table: ../outside.md -->' points outside the repository"),
    "far-dot-dot": (b"<!-- table: ../../../../../../../../etc/passwd -->\nx\n<!-- /table -->\n",
                    "'<!-- table: ../../../../../../../../etc/passwd -->' points outside the repository"),
    "absolute": (b"<!-- table: /etc/passwd -->\nx\n<!-- /table -->\n",
                 "'<!-- table: /etc/passwd -->' points outside the repository"),
    "link-out": (b"<!-- table: reports/link.md -->\nx\n<!-- /table -->\n",
                 "'<!-- table: reports/link.md -->' points outside the repository"),
    "source-not-UTF-8": (b"<!-- table: reports/latin1.md -->\nx\n<!-- /table -->\n",
                         "'<!-- table: reports/latin1.md -->': reports/latin1.md: not UTF-8 text"),
}


@pytest.mark.parametrize("check", [False, True], ids=["fill", "check"])
@pytest.mark.parametrize("case", BAD_READMES)
def test_a_bad_readme_or_marker_is_one_error_line_naming_both_and_nothing_is_written(tmp_path, capsys, case, check):
    root = tmp_path / "repo"
    (root / "reports").mkdir(parents=True)
    (root / "reports" / "a.md").write_text("table\n")
    (root / "reports" / "latin1.md").write_bytes("caf\xe9\n".encode("latin-1"))
    (tmp_path / "outside.md").write_text("not ours\n")
    (root / "reports" / "link.md").symlink_to(tmp_path / "outside.md")
    text, message = BAD_READMES[case]
    readme = root / "README.md"
    if text is not None:
        readme.write_bytes(text)
    before = _snapshot(tmp_path)
    assert readme_tables.main([str(readme)] + (["--check"] if check else [])) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {readme}: ") and err.count("\n") == 1, err
    assert message in err, err
    assert _snapshot(tmp_path) == before
