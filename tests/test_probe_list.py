"""docs/probes.md lists the bad inputs and faults the project is tried with; every entry names a real test.

The list is the reader's index; this test keeps it honest: at least 40 probes, each pointing at
a test function that exists, so a renamed or deleted test cannot leave a probe uncovered.
"""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBES = ROOT / "docs" / "probes.md"
NODE_ID = re.compile(r"`(tests/[\w/]+\.py)::([\w:]+)(?:\[[^`]*\])?`")


def _probe_rows() -> list[str]:
    return [line for line in PROBES.read_text().splitlines() if re.match(r"\|\s*\d+\s*\|", line)]


def _test_names(path: Path) -> set[str]:
    """``name`` and ``Class::name`` for every test function in ``path``."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names.update(f"{node.name}::{item.name}" for item in node.body if isinstance(item, ast.FunctionDef))
    return names


def test_the_list_holds_at_least_40_probes_each_with_a_test():
    rows = _probe_rows()
    assert len(rows) >= 40, f"{PROBES} lists {len(rows)} probes"
    for row in rows:
        assert NODE_ID.search(row), f"probe without a test node id: {row}"


def test_every_named_test_exists():
    missing = []
    for row in _probe_rows():
        for file, name in NODE_ID.findall(row):
            path = ROOT / file
            if not path.is_file() or name not in _test_names(path):
                missing.append(f"{file}::{name}")
    assert not missing, f"docs/probes.md names tests that do not exist: {missing}"


def test_probe_numbers_run_from_1_without_gaps():
    numbers = [int(re.match(r"\|\s*(\d+)", row).group(1)) for row in _probe_rows()]
    assert numbers == list(range(1, len(numbers) + 1))
