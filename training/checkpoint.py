"""Checkpoints that survive a kill: written atomically, and on SIGTERM/SIGINT as well as every epoch.

    >>> save_atomic({"step": 3}, Path("runs/demo/checkpoint.pt"))   # doctest: +SKIP
    >>> load(Path("runs/demo/checkpoint.pt"))["step"]                # doctest: +SKIP
    3
"""

from __future__ import annotations

import abc
import os
import random
import signal
from pathlib import Path

import numpy as np
import torch


def save_atomic(payload: dict, path: Path) -> None:
    """Write ``payload`` with torch.save to a temporary file beside ``path``, then rename it into place.

    A reader sees the old checkpoint or the new one, never half of one, even if the process dies
    mid-write (the rename is atomic on POSIX file systems).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "wb") as file:
        torch.save(payload, file)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)


def load(path: Path) -> dict:
    """A checkpoint written by :func:`save_atomic` (our own files: RNG states need full unpickling)."""
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}; start without --resume, or point --out at the run to resume")
    return torch.load(path, map_location="cpu", weights_only=False)


def rng_states() -> dict:
    states = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def restore_rng_states(states: dict) -> None:
    random.setstate(states["python"])
    np.random.set_state(states["numpy"])
    torch.set_rng_state(states["torch"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


class StopSignalHandler(abc.ABC):
    """Routes SIGTERM and SIGINT to ``self._handle`` while active; the previous handlers come back on exit."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self):
        self._previous = {}

    @abc.abstractmethod
    def _handle(self, number, frame):
        """React to stop signal ``number`` (called by Python's signal machinery)."""

    def __enter__(self):
        for number in self.SIGNALS:
            self._previous[number] = signal.signal(number, self._handle)
        return self

    def __exit__(self, *exc):
        for number, previous in self._previous.items():
            signal.signal(number, previous)
        return False


class StopRequests(StopSignalHandler):
    """Catches SIGTERM and SIGINT while active, so the trainer can checkpoint before it exits.

    ``requested`` holds the signal number once one arrived; a second signal of the same kind
    falls through to the previous handler (a user pressing Ctrl-C twice means it).
    """

    def __init__(self):
        super().__init__()
        self.requested: int | None = None

    def _handle(self, number, frame):
        if self.requested is not None:
            previous = self._previous.get(number)
            if callable(previous):
                previous(number, frame)
            raise KeyboardInterrupt
        self.requested = number
