"""The README is a front page: short, its examples run as written, its links and the docs' lead somewhere."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.hang_guard import HANG_GUARD_S

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")


def readme_examples() -> list[str]:
    return PYTHON_BLOCK.findall(README.read_text())


def test_the_readme_reads_in_a_few_minutes_and_its_commands_come_first():
    lines = README.read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; move details to docs/"
    first_screen = "\n".join(lines[:15])
    assert "make demo" in first_screen and "make test" in first_screen
    assert "2-core CPU" in README.read_text(), "the README should say where its figures were measured"


@pytest.mark.parametrize("example", readme_examples(), ids=lambda code: code.splitlines()[-1][:40])
def test_each_readme_example_runs_as_written(example):
    # As a user runs it: on a CPU the kernels run their references, not Triton's interpreter.
    env = {name: value for name, value in os.environ.items()
           if name not in ("FASTCORE_OPS_INTERPRET", "TRITON_INTERPRET")}
    done = subprocess.run([sys.executable, "-c", example], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=HANG_GUARD_S)
    assert done.returncode == 0, done.stderr[-3000:]


def test_the_readme_has_its_three_uses():
    assert len(readme_examples()) == 3


@pytest.mark.parametrize("page", PAGES, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file(page):
    targets = [match[1] for match in LINK.finditer(page.read_text()) if "://" not in match[1]]
    missing = [target for target in targets if not (page.parent / target).exists()]
    assert missing == [], f"{page.relative_to(ROOT)} links to files that do not exist: {missing}"
