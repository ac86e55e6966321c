"""Checkpoints that survive a kill, a full disk and a damaged file, and never run code when loaded.

A checkpoint file is one header line, ``fastcore_ops checkpoint v1 sha256=<digest>``, then the
payload serialized by torch.save. The payload holds only tensors and plain containers, is
loaded with ``torch.load(weights_only=True)``, and its sha256 is checked first, so a truncated,
corrupted or crafted file gives one :class:`CheckpointError` naming it; so does a run's payload
that lacks a field of :data:`RUN_LAYOUT` or holds one of another type. Files are written
atomically (temporary file, fsync, rename), and the last ``keep`` checkpoints are kept as
``checkpoint.pt`` (newest), ``checkpoint.1.pt``, ``checkpoint.2.pt``, ...

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "checkpoint.pt"
    >>> save_atomic({"step": 3}, path)
    >>> load(path)["step"]
    3
    >>> _ = path.write_bytes(b"")
    >>> load(path)
    Traceback (most recent call last):
    ...
    fastcore_ops.training.checkpoint.CheckpointError: .../checkpoint.pt is not a fastcore_ops checkpoint: the file is empty
"""

from __future__ import annotations

import abc
import errno
import hashlib
import io
import os
import pickle
import random
import re
import signal
import time
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from fastcore_ops.checks import check_int, check_number

CHECKPOINT_NAME = "checkpoint.pt"
FORMAT_VERSION = 1
_HEADER = re.compile(rb"fastcore_ops checkpoint v(\d+) sha256=([0-9a-f]{64})")
_MAGIC = b"fastcore_ops checkpoint v"


class CheckpointError(Exception):
    """A checkpoint could not be written or read; the message names the file and what to do."""


def encode(payload: dict) -> bytes:
    """``payload`` as the bytes of a checkpoint file: the header line with its sha256, then the payload.

    >>> encode({"step": 1})[:28]
    b'fastcore_ops checkpoint v1 s'
    """
    buffer = io.BytesIO()
    torch.save({**payload, "format_version": FORMAT_VERSION}, buffer)
    body = buffer.getvalue()
    header = f"fastcore_ops checkpoint v{FORMAT_VERSION} sha256={hashlib.sha256(body).hexdigest()}\n"
    return header.encode() + body


@dataclass(frozen=True)
class Layout:
    """The fields a checkpoint's payload holds, each with the types it may take (a bool is not an int), or
    :class:`Counts`.

    added_later: fields that checkpoints of older versions lack (their reader supplies a default).
    """

    fields: dict
    added_later: dict

    def check(self, payload: dict, path: Path) -> None:
        """CheckpointError naming ``path`` for a field ``payload`` lacks or holds with another type."""
        for name, kinds in {**self.fields, **self.added_later}.items():
            if name not in payload:
                if name in self.added_later:
                    continue
                raise CheckpointError(f"{path} is not a fastcore_ops checkpoint: its payload lacks {name!r}; only "
                                      f"files written by fastcore_ops.training.train are loaded")
            if kinds is Counts:
                Counts.check(name, payload[name], path)
                continue
            kinds, value = kinds if isinstance(kinds, tuple) else (kinds,), payload[name]
            if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
                names = " or ".join("None" if kind is type(None) else kind.__name__ for kind in kinds)
                raise CheckpointError(f"{path} is not a fastcore_ops checkpoint: its {name!r} is a "
                                      f"{type(value).__name__}, not {names}; only files written by fastcore_ops.training.train "
                                      f"are loaded")


class Counts:
    """A :class:`Layout` field's kind: a dict of names to counts (ints >= 0)."""

    @staticmethod
    def check(name: str, value: object, path: Path) -> None:
        if not isinstance(value, dict) or not all(isinstance(key, str) and type(count) is int and count >= 0
                                                  for key, count in value.items()):
            raise CheckpointError(f"{path} is not a fastcore_ops checkpoint: its {name!r} is not a dict of names to "
                                  f"counts (ints >= 0); only files written by fastcore_ops.training.train are loaded")


_SECONDS = (int, float)
# A run's checkpoint, as fastcore_ops.training.trainer writes it: checked on reading, so that a payload missing a
# field, or holding another type, is refused naming the file, not met as a KeyError halfway through a resume.
RUN_LAYOUT = Layout(fields={
    "model": dict, "optimizer": dict, "scheduler": dict, "scaler": dict, "methods": dict, "rng": dict,
    "step": int, "epoch": int, "batch_in_epoch": int, "samples_seen": int, "epoch_losses": int,
    "epoch_loss_sum": torch.Tensor, "train_seconds": _SECONDS, "first_epoch_seconds": _SECONDS,
    "phase_seconds": dict, "method_seconds": dict, "final": (dict, type(None)),
}, added_later={"compile_seconds": _SECONDS, "eval_seconds": _SECONDS, "steps_by_threads": Counts})


def decode(data: bytes, path: Path, layout: Layout | None = None) -> dict:
    """The payload in ``data`` (read from ``path``), or a CheckpointError saying what is wrong with it.

    layout: the fields the payload must hold (:data:`RUN_LAYOUT` for a run's checkpoint); None: any.
    """
    if not data:
        raise CheckpointError(f"{path} is not a fastcore_ops checkpoint: the file is empty")
    header, _, body = data.partition(b"\n")
    match = _HEADER.fullmatch(header)
    if match is None:
        raise CheckpointError(f"{path} is not a fastcore_ops checkpoint (no fastcore_ops header); "
                              f"only files written by fastcore_ops.training.train are loaded")
    if int(match[1]) != FORMAT_VERSION:
        raise CheckpointError(f"{path} is a version {int(match[1])} fastcore_ops checkpoint; "
                              f"this code reads version {FORMAT_VERSION}")
    if hashlib.sha256(body).hexdigest() != match[2].decode():
        raise CheckpointError(f"checkpoint {path} is corrupted: its contents do not match their sha256 "
                              f"checksum (truncated or changed on disk)")
    if not zipfile.is_zipfile(io.BytesIO(body)):  # torch.save's format; anything else is not ours
        raise CheckpointError(f"{path} is not a fastcore_ops checkpoint: its payload is not a torch.save archive")
    try:
        payload = torch.load(io.BytesIO(body), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise CheckpointError(f"{path} is not a fastcore_ops checkpoint: it holds objects other than tensors "
                              f"and plain containers, which are never loaded (they could run code)") from None
    except (RuntimeError, EOFError, ValueError) as error:  # a forged archive with a matching checksum
        raise CheckpointError(f"{path} is not a fastcore_ops checkpoint: its payload cannot be read ({error})") from None
    if not isinstance(payload, dict) or payload.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(f"{path} is not a fastcore_ops checkpoint: no format version {FORMAT_VERSION} inside")
    if layout is not None:
        layout.check(payload, path)
    return payload


def _write_synced(data: bytes, path: Path) -> None:
    with open(path, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())


def _write_temporary(payload: dict, path: Path) -> Path:
    """Write ``payload`` beside ``path``; on failure remove the partial file and raise CheckpointError."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    try:
        _write_synced(encode(payload), temporary)
    except OSError as error:
        temporary.unlink(missing_ok=True)
        reason = "no space left on device" if error.errno == errno.ENOSPC else f"{error.strerror or error}"
        kept = ("the previous checkpoint is intact" if existing(path) else
                "it was the first one there, so there is no earlier checkpoint to resume from")
        raise CheckpointError(f"{reason} while writing checkpoint {path}; {kept}") from None
    return temporary


def save_atomic(payload: dict, path: Path) -> None:
    """Write ``payload`` to a temporary file beside ``path``, then rename it into place.

    A reader sees the old checkpoint or the new one, never half of one, even if the process dies
    mid-write (the rename is atomic on POSIX file systems).
    """
    os.replace(_write_temporary(payload, path), path)


def older(path: Path, age: int) -> Path:
    """The file of the checkpoint ``age`` saves before the newest (``age`` 0 is ``path`` itself).

    >>> older(Path("run/checkpoint.pt"), 2).name
    'checkpoint.2.pt'
    """
    return path if age == 0 else path.with_name(f"{path.stem}.{age}{path.suffix}")


def is_checkpoint_file(path: Path) -> bool:
    """Whether ``path`` is a regular file that starts as every checkpoint this module writes does.

    >>> is_checkpoint_file(Path("/nonexistent/checkpoint.pt"))
    False
    """
    if path.is_symlink() or not path.is_file():
        return False
    with open(path, "rb") as file:
        return file.read(len(_MAGIC)) == _MAGIC


def _check_replaceable(paths: list[Path]) -> None:
    """CheckpointError naming the first of ``paths`` that exists and is not a checkpoint (never overwritten)."""
    for path in paths:
        if path.exists() and not is_checkpoint_file(path):
            raise CheckpointError(f"{path} is not a fastcore_ops checkpoint, and keeping older checkpoints would "
                                  f"overwrite it; move it out of the run's folder, then resume")


def save_keeping(payload: dict, path: Path, keep: int) -> None:
    """Save ``payload`` atomically as ``path`` and keep the ``keep - 1`` checkpoints before it.

    The new file is complete on disk before any older one moves, so a kill at any moment leaves
    at least one whole checkpoint (:func:`load_newest` finds it). Only checkpoints are moved or
    replaced: another file in one of their places stops the save with a CheckpointError.
    """
    _check_replaceable([older(path, age) for age in range(keep)])
    temporary = _write_temporary(payload, path)
    for age in range(keep - 1, 0, -1):
        if older(path, age - 1).is_file():
            os.replace(older(path, age - 1), older(path, age))
    os.replace(temporary, path)


def existing(path: Path) -> list[Path]:
    """The checkpoint files of the run whose newest checkpoint is ``path``, newest first."""
    found, age = [], 0
    # Age 0 may be missing for an instant while the files move up (see save_keeping).
    while older(path, age).is_file() or (age == 0 and older(path, 1).is_file()):
        if older(path, age).is_file():
            found.append(older(path, age))
        age += 1
    return found


def load(path: Path, layout: Layout | None = None) -> dict:
    """A checkpoint written by :func:`save_atomic` or :func:`save_keeping`, its fields checked against ``layout``."""
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}; start without --resume, or point --out at the run to resume")
    return decode(path.read_bytes(), path, layout)


def load_newest(path: Path, layout: Layout | None = None) -> dict:
    """The newest readable checkpoint among ``path`` and its older copies (with the fields of ``layout``).

    A damaged newer one is skipped with a warning naming it (the run goes back to the one
    before, losing the steps in between); when none is readable, the newest one's error.
    """
    candidates = existing(path) or [path]
    errors = []
    for candidate in candidates:
        try:
            payload = load(candidate, layout)
        except CheckpointError as error:
            errors.append(error)
            continue
        for error in errors:
            warnings.warn(f"{error}; resuming from the older {candidate} instead", stacklevel=2)
        return payload
    raise errors[0]


@dataclass(frozen=True)
class CheckpointPolicy:
    """When a run checkpoints within an epoch, and how many checkpoints it keeps (each epoch's end always saves).

    every_steps: every this many optimizer steps; None: every ``every_seconds`` of training instead.
    keep: the newest checkpoints kept on disk (>= 1); more than one lets a resume survive a damaged newest file.

    >>> CheckpointPolicy(every_steps=0)
    Traceback (most recent call last):
    ...
    ValueError: every_steps must be an int >= 1, got 0
    """

    every_steps: int | None = None
    every_seconds: float = 600.0
    keep: int = 2

    def __post_init__(self):
        if self.every_steps is not None:
            check_int("every_steps", self.every_steps, low=1)
        check_number("every_seconds", self.every_seconds, low=0, low_open=True)
        check_int("keep", self.keep, low=1)


def rng_states() -> dict:
    """Every global RNG state the run draws from, as tensors and plain lists (loadable with weights_only)."""
    version, internal, gauss = random.getstate()
    kind, keys, position, has_gauss, cached = np.random.get_state()
    states = {"python": [version, list(internal), gauss],
              "numpy": [kind, keys.tolist(), position, has_gauss, cached], "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def restore_rng_states(states: dict) -> None:
    version, internal, gauss = states["python"]
    random.setstate((version, tuple(internal), gauss))
    kind, keys, position, has_gauss, cached = states["numpy"]
    np.random.set_state((kind, np.array(keys, dtype=np.uint32), position, has_gauss, cached))
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

    ``requested`` holds the signal number once one arrived. One stop often arrives several times
    within moments: from the process group, again from torchrun or a sweep passing theirs on, and
    from each decoding worker that got it too (fastcore_ops/data/backends/workers/worker_stop.py); those are one
    request. A signal ``ECHO_SECONDS`` or more after the first falls through to the previous
    handler (a user pressing Ctrl-C again means it).
    """

    # The copies are passed on at once (torchrun's handler, the workers' signal threads): milliseconds after the first.
    ECHO_SECONDS = 2.0

    def __init__(self):
        super().__init__()
        self.requested: int | None = None
        self._first_at = 0.0

    def _handle(self, number, frame):
        now = time.monotonic()
        if self.requested is None:
            self.requested, self._first_at = number, now
            return
        if now - self._first_at >= self.ECHO_SECONDS:
            previous = self._previous.get(number)
            if callable(previous):
                previous(number, frame)
            raise KeyboardInterrupt
