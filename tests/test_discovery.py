"""Every registry finds its entries by importing each module of its package: none is left out unseen."""

import re
import sys
from pathlib import Path

import pytest

from fastcore_ops.discovery import import_package_modules


def _package(root, name: str, modules: dict[str, str]) -> str:
    """A package ``name`` under ``root`` holding ``modules`` (file name -> source); its name."""
    (root / name).mkdir()
    (root / name / "__init__.py").write_text("LOADED = []\n")
    for file, source in modules.items():
        (root / name / file).write_text(source)
    return name


REGISTERS = "from {package} import LOADED\nLOADED.append(__name__.rsplit('.', 1)[1])\n"


def test_every_module_of_the_package_is_imported_once(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    package = _package(tmp_path, "discovered_all", {"b.py": REGISTERS.format(package="discovered_all"),
                                                    "a.py": REGISTERS.format(package="discovered_all")})
    assert import_package_modules(package) == ["a", "b"] == import_package_modules(package)
    assert sys.modules[package].LOADED == ["a", "b"]


def test_a_module_that_fails_as_it_loads_fails_every_registry_that_reads_it(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    package = _package(tmp_path, "discovered_broken", {"fine.py": "", "broken.py": "raise RuntimeError('broken')\n"})
    for _ in range(2):  # not only the first time: a failure is never remembered as done
        with pytest.raises(RuntimeError, match="broken"):
            import_package_modules(package)


@pytest.mark.parametrize("file, package", [("my.method.py", "discovered_dotted"), ("my-method.py", "discovered_dashed")])
def test_a_file_that_cannot_be_a_module_is_refused_by_name_not_skipped(file, package, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    _package(tmp_path, package, {"fine.py": "", file: ""})
    with pytest.raises(ImportError, match=f"{re.escape(file)} cannot be imported as a module .* rename it"):
        import_package_modules(package)


def test_no_registry_discovers_its_modules_another_way():
    root = Path(__file__).resolve().parents[1]
    others = [path.relative_to(root).as_posix() for path in sorted((root / "fastcore_ops").rglob("*.py"))
              if "pkgutil" in path.read_text() and path.name != "discovery.py"]
    assert not others, f"modules listing a package's modules themselves (use fastcore_ops.discovery): {others}"
