"""Output folders a tool may change: ones it created, found empty, or marked as its own before.

A tool that deletes or overwrites files in its output folder (``prepare`` restarting a shard,
the tradeoff sweep restarting a run, a benchmark rewriting its tables) may only touch files it
provably wrote. The proof is a marker file, ``.fastcore_ops-<tool>``, written when the tool
first takes the folder. A folder that is neither empty nor marked by that tool is refused, so a
user's own files (``ubuntu.iso.partial``, another tool's results) are never touched.

Check first, claim once the command's inputs are known to be good, so a refused command
leaves the folder as it was:

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp()) / "out"
    >>> check_claimable(folder, "prepare")      # nothing written yet
    >>> claim_folder(folder, "prepare")         # created: True
    True
    >>> owns(folder, "prepare"), owns(folder, "tradeoff")
    (True, False)
    >>> _ = (folder / "notes.txt").write_text("mine")
    >>> check_claimable(folder, "tradeoff")
    Traceback (most recent call last):
    ...
    ValueError: .../out holds files that python -m fastcore_ops.training.tradeoff did not write (it has no .fastcore_ops-tradeoff); pass an empty or new folder
"""

from __future__ import annotations

import os
from pathlib import Path

MARKER_PREFIX = ".fastcore_ops-"
_COMMANDS = {"prepare": "fastcore_ops.data.prepare", "datasets": "fastcore_ops.data.datasets",
             "tradeoff": "fastcore_ops.training.tradeoff", "ablate": "fastcore_ops.training.ablate",
             "alibi_extrapolation": "fastcore_ops.training.alibi_extrapolation",
             "export": "fastcore_ops.training.export", "text_prepare": "fastcore_ops.training.text.prepare",
             "benchmarks": "benchmarks", "peers": "benchmarks.peers"}


def marker(folder: str | os.PathLike, tool: str) -> Path:
    """The marker file that says ``tool`` took ``folder``.

    >>> marker("out", "prepare").name
    '.fastcore_ops-prepare'
    """
    return Path(folder) / f"{MARKER_PREFIX}{tool}"


def owns(folder: str | os.PathLike, tool: str) -> bool:
    """Whether ``folder`` carries ``tool``'s marker (a regular file, not a link planted there)."""
    path = marker(folder, tool)
    return path.is_file() and not path.is_symlink()


def _is_empty(folder: Path) -> bool:
    with os.scandir(folder) as entries:
        return next(entries, None) is None


def _command(tool: str) -> str:
    return f"python -m {_COMMANDS.get(tool, tool)}"


def check_claimable(folder: str | os.PathLike, tool: str) -> None:
    """ValueError unless ``tool`` may write into ``folder``: absent, empty, or marked by ``tool``. Writes nothing."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{folder} is a file, not a folder; pass a folder for the output")
    if not folder.exists() or owns(folder, tool) or _is_empty(folder):
        return
    raise ValueError(f"{folder} holds files that {_command(tool)} did not write (it has no {marker(folder, tool).name}); "
                     f"pass an empty or new folder")


def claim_folder(folder: str | os.PathLike, tool: str) -> bool:
    """Take ``folder`` for ``tool`` (see :func:`check_claimable`): create it if needed and mark it.

    Returns whether the folder was created here, so a start that fails can :func:`release_folder` it.
    """
    folder = Path(folder)
    check_claimable(folder, tool)
    created = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    if not owns(folder, tool):
        marker(folder, tool).write_text(f"written by {_command(tool)}: it may replace the files it wrote here\n")
    return created


def release_folder(folder: str | os.PathLike, tool: str) -> None:
    """Undo :func:`claim_folder` of a folder this run created: remove the marker, then the folder if nothing else is in it."""
    folder = Path(folder)
    marker(folder, tool).unlink(missing_ok=True)
    if folder.is_dir() and _is_empty(folder):
        folder.rmdir()
