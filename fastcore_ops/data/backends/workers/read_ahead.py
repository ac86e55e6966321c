"""Files read on a thread while earlier batches train, where the process that trains also decodes.

A CPU step that takes every core leaves no core to a decoding worker, so the pil backend decodes in the
training process, between steps (``data.num_workers=-1`` on two cores). There each file not yet decoded
was read just before its decode, and the step waited for the disk. Here the files of the next runs are read
on threads of their own, which wait for the disk without holding the interpreter, while the step computes:
on a 2-core Zen 4 EPYC the first epoch of ``cifar_record_muon_resize`` from a cold page cache spent 10.5-10.8 s
in its data phase, against 17.0-20.4 s before (``reports/read-ahead-20261203/``). Workers need none of it:
they decode ahead of the step already.

Each run's files are read by one short-lived thread, at most ``depth`` runs ahead, so no thread is left
running once an epoch's runs are taken (a process that forks later forks no idle reader) and at most
``depth`` runs' encoded bytes are held.

    >>> ahead = ReadAhead(read=lambda path: path.encode(), wanted=lambda path: True)
    >>> ahead.begin([(0, ["a.jpg", "b.jpg"]), (2, ["c.jpg"])])
    >>> ahead.take(0)
    {'a.jpg': b'a.jpg', 'b.jpg': b'b.jpg'}
    >>> ahead.take(2)
    {'c.jpg': b'c.jpg'}
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence


class _RunRead:
    """One run's files, read on a thread of their own: each to its bytes, or to the exception reading raised."""

    def __init__(self, paths: Sequence[Hashable], read: Callable[[Hashable], bytes]):
        self.files: dict[Hashable, bytes | Exception] = {}
        self._thread = threading.Thread(target=self._read_all, args=(paths, read), name="read-ahead", daemon=True)
        self._thread.start()

    def _read_all(self, paths: Sequence[Hashable], read: Callable[[Hashable], bytes]) -> None:
        for path in paths:
            try:
                self.files[path] = read(path)
            except Exception as error:  # raised again where the file is decoded, as reading it there would
                self.files[path] = error

    def result(self) -> dict[Hashable, bytes | Exception]:
        self._thread.join()
        return self.files


class ReadAhead:
    """Reads each run's ``wanted`` files with ``read`` on a thread, up to ``depth`` runs before the one taken.

    wanted: asked on the calling thread as a run's reading starts; a file it declines is left to be read
    where it is decoded (one whose crop is kept already, say).
    """

    def __init__(self, read: Callable[[Hashable], bytes], wanted: Callable[[Hashable], bool], depth: int = 2):
        self.read, self.wanted, self.depth = read, wanted, depth
        self._waiting: list[tuple[Hashable, Sequence[Hashable]]] = []
        self._reading: dict[Hashable, _RunRead] = {}

    def begin(self, runs: Sequence[tuple[Hashable, Sequence[Hashable]]]) -> None:
        """Start on ``runs``, (key, files) pairs in the order they will be taken; forgets runs begun before."""
        self._reading.clear()
        self._waiting = list(reversed(runs))
        self._read_more()

    def take(self, key: Hashable) -> dict[Hashable, bytes | Exception]:
        """The files read for run ``key`` (waiting for its thread), and the next run's reading started;
        {} for a run not begun."""
        run = self._reading.pop(key, None)
        self._read_more()
        return {} if run is None else run.result()

    def _read_more(self) -> None:
        while self._waiting and len(self._reading) < self.depth:
            key, paths = self._waiting.pop()
            self._reading[key] = _RunRead([path for path in paths if self.wanted(path)], self.read)
