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


@pytest.mark.parametrize(("marker", "message"), [
    ("<!-- table: reports/missing.md -->\n<!-- /table -->", "no such file"),
    ("<!-- table: ../outside.md -->\n<!-- /table -->", "outside the repository"),
    ("<!-- table: reports/a.md -->\nno end marker", "has no '<!-- /table -->'"),
])
def test_a_bad_marker_is_named_and_the_readme_is_left_alone(tmp_path, marker, message):
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "a.md").write_text("table\n")
    (tmp_path.parent / "outside.md").write_text("not ours\n")
    readme = tmp_path / "README.md"
    readme.write_text(marker)
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        readme_tables.main([str(readme)])
    assert readme.read_text() == marker
