"""The library (kernels, surgery, data) stands without its trainer: fastcore_ops.training imports the library,
never the other way, so a user of the library alone loads none of the trainer."""

import ast
import subprocess
import sys
from pathlib import Path

from tests.hang_guard import HANG_GUARD_S

PACKAGE = Path(__file__).resolve().parents[1] / "fastcore_ops"
TRAINER = "fastcore_ops.training"


def trainer_imports(source: str) -> list[int]:
    """The lines of ``source`` that import the trainer, wherever in the file (a function's own imports too).

        >>> trainer_imports("import os\\nfrom fastcore_ops.training.config import TrainConfig\\n")
        [2]
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
        if any(name == TRAINER or name.startswith(TRAINER + ".") for name in names):
            found.append(node.lineno)
    return found


def test_no_library_module_imports_the_trainer():
    library = [path for path in PACKAGE.rglob("*.py") if not path.is_relative_to(PACKAGE / "training")]
    assert len(library) > 50
    found = {str(path.relative_to(PACKAGE)): lines for path in library if (lines := trainer_imports(path.read_text()))}
    assert found == {}


def test_importing_the_library_loads_none_of_the_trainer():
    script = ("import sys, fastcore_ops, fastcore_ops.data, fastcore_ops.surgery\n"
              f"print(sorted(name for name in sys.modules if name.startswith({TRAINER!r})))")
    done = subprocess.run([sys.executable, "-c", script], cwd=PACKAGE.parent, capture_output=True, text=True,
                          check=True, timeout=HANG_GUARD_S)
    assert done.stdout.strip() == "[]"
