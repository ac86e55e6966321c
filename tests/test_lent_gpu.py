"""tools/lent_gpu.sh's refusals: one ``error:`` line, exit 2, and nothing of the user's touched."""

import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "tools" / "lent_gpu.sh"


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True, timeout=60)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A git repository beside a ../shared/datasets with the folders prepare looks for."""
    repo = tmp_path / "project"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for folder in ("cifar10-jpeg/train", "imagenet-sample"):
        (tmp_path / "shared" / "datasets" / folder).mkdir(parents=True)
    return repo


def test_prepare_refuses_to_replace_a_carry_folder_it_did_not_write(checkout: Path):
    theirs = checkout / ".gpu-carry" / "notes.txt"
    theirs.parent.mkdir()
    theirs.write_text("someone's notes")
    result = _run(checkout, "prepare")
    assert result.returncode == 2
    assert result.stderr.startswith("error: .gpu-carry exists and was not written by tools/lent_gpu.sh")
    assert len(result.stderr.splitlines()) == 1
    assert theirs.read_text() == "someone's notes"


@pytest.mark.parametrize("args", [(), ("prepare", "extra"), ("run",), ("unknown",)])
def test_bad_usage_is_one_error_line_and_exit_2(checkout: Path, args: tuple[str, ...]):
    result = _run(checkout, *args)
    assert result.returncode == 2
    assert result.stderr.startswith("error: usage: tools/lent_gpu.sh")
    assert len(result.stderr.splitlines()) == 1


def test_run_without_prepared_wheels_says_what_to_do(checkout: Path):
    out = checkout / "out"
    result = _run(checkout, "run", str(out))
    assert result.returncode == 2
    assert "run tools/lent_gpu.sh prepare here and carry .gpu-carry" in result.stderr
    assert not out.exists()
