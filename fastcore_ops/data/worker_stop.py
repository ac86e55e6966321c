"""Stop a backend's DataLoader workers as soon as the backend is gone, however it goes.

Why not leave it to PyTorch: its iterator stops persistent workers with a message through a
multiprocessing queue, from the iterator's ``__del__``. When the backend is dropped inside a
reference cycle (a traceback holding a frame, say), the garbage collector runs the queues' own
finalizers first (weak-reference callbacks run before ``__del__``); they end the threads that
would have sent those messages, so each worker waits out PyTorch's 5 s join and is then killed.
Here each worker also watches an event of its backend's and leaves at once when it is set: by
``close`` or by a finalizer on the backend, whichever comes first.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import weakref


class WorkerStop:
    """An event that ``owner``'s workers leave on: set by :meth:`stop`, or when ``owner`` is collected.

    >>> class Backend: ...
    >>> backend = Backend()
    >>> stop = WorkerStop(backend)
    >>> stop.event.is_set()
    False
    >>> del backend  # or stop.stop()
    >>> stop.event.is_set()
    True
    """

    def __init__(self, owner: object):
        self.event = multiprocessing.Event()
        # Holds the event's bound method, not the owner, so the owner can still be collected.
        self._finalizer = weakref.finalize(owner, self.event.set)

    def stop(self) -> None:
        """Let the workers go now."""
        self._finalizer()


def leave_when_set(event) -> None:
    """In a worker: end this process as soon as ``event`` is set.

    Exit status 0, so PyTorch's check on its workers' exits sees a clean end, not a crash.
    """
    threading.Thread(target=_exit_when_set, args=(event,), name="worker-stop", daemon=True).start()


def _exit_when_set(event) -> None:
    event.wait()
    os._exit(0)
