"""How a backend's DataLoader workers stop: as soon as the backend is gone, however it goes, and
never on a stop signal of their own.

Why not leave it to PyTorch: its iterator stops persistent workers with a message through a
multiprocessing queue, from the iterator's ``__del__``. When the backend is dropped inside a
reference cycle (a traceback holding a frame, say), the garbage collector runs the queues' own
finalizers first (weak-reference callbacks run before ``__del__``); they end the threads that
would have sent those messages, so each worker waits out PyTorch's 5 s join and is then killed.
Here each worker also watches a pipe of its backend's and leaves at once when something is written
to it: by ``close`` or by a finalizer on the backend, whichever comes first. A pipe, not a
``multiprocessing.Event``: setting an Event waits for every process waiting on it to wake, and
forever for one that died (a worker killed by a signal or by the out-of-memory killer), which hung
the process that closed the loader. A worker also leaves once that process is gone: PyTorch's own
watchdog compares the worker's parent with the one it reads as the worker starts, so a worker whose
process was killed while it started (before that read) watched the process that adopted it, and
lived on.

Stop signals (SIGTERM, SIGINT) are the job's, not a worker's. They reach the workers with the rest
of the process group (``kill -TERM -PGID``; Slurm and systemd signal every process of the job) or
alone (a user or an out-of-memory guard picking one process). A worker that died of one left the
process reading its batches waiting for batches that never come, or PyTorch's SIGCHLD handler
raised an error in it wherever it stood, a checkpoint half-written included. So a worker passes a
stop signal on to that process and goes on decoding until it is told to leave: the process decides
how to stop. A worker starts with stop signals blocked (:func:`starting_workers`), so one sent before
it is ready to pass them on waits for it, instead of running the handler the worker inherited from
that process, in the worker's copy, where it is lost. Two are not passed on: one from that process
itself (PyTorch ending a worker that did not leave when asked: the worker leaves) and one sent by the
kernel (a terminal's Ctrl-C, which reaches the whole foreground process group, that process included).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
import weakref

STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT})

# How often a worker checks that the process it decodes for is still there (a wake-up a second costs nothing).
_OWNER_CHECK_S = 1.0

# si_code of a signal the kernel sent (Linux's <asm-generic/siginfo.h>); Python names no constant for it.
_SENT_BY_KERNEL = 0x80


class WorkerStop:
    """A pipe that ``owner``'s workers leave on: written to by :meth:`stop`, or when ``owner`` is collected.

    >>> class Backend: ...
    >>> backend = Backend()
    >>> stop = WorkerStop(backend)
    >>> stop.watched.poll()
    False
    >>> del backend  # or stop.stop()
    >>> stop.watched.poll()
    True
    >>> stop.owner_process == os.getpid()  # the workers' parent: they leave when it is gone
    True
    """

    def __init__(self, owner: object):
        self.watched, told = multiprocessing.Pipe(duplex=False)
        self.owner_process = os.getpid()
        # Holds the pipe's ends, not the owner, so the owner can still be collected; the read end
        # stays open until the message is written, so writing it never meets a closed pipe.
        self._finalizer = weakref.finalize(owner, _tell, told, self.watched)

    def stop(self) -> None:
        """Let the workers go now."""
        self._finalizer()


def _tell(told, watched) -> None:
    told.send_bytes(b"")


@contextlib.contextmanager
def starting_workers():
    """Start workers inside it: they are born with stop signals blocked, which :func:`in_worker` then takes
    from the kernel's queue, so a stop signal sent to a worker in its first moments is passed on too.

    The calling thread holds them back meanwhile; the kernel delivers them to it on leaving, or to another
    thread of the process before.

    >>> with starting_workers():
    ...     pass  # iter(loader) forks its workers here
    """
    if not hasattr(signal, "sigwaitinfo"):  # no in_worker to take them: blocked, they would never arrive
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def in_worker(watched, owner_process: int) -> None:
    """In a worker, from its main thread before any other thread starts: leave as soon as ``watched``
    is written to or ``owner_process`` (:attr:`WorkerStop.owner_process`, the worker's parent) is gone, and
    pass stop signals on to that process (see above).

    Leaving is exit status 0, so PyTorch's check on its workers' exits sees a clean end, not a crash.
    """
    if hasattr(signal, "sigwaitinfo"):  # not on macOS or Windows: there a stop signal ends the worker
        # Blocked first (if starting_workers has not), so in every thread started from here on: only
        # sigwaitinfo takes them, with their sender, those that came before included.
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        threading.Thread(target=_pass_stop_signals_on, args=(owner_process,), name="worker-signals",
                         daemon=True).start()
    threading.Thread(target=_exit_when_told, args=(watched, owner_process), name="worker-stop", daemon=True).start()


def _exit_when_told(watched, owner_process: int) -> None:
    # The parent is given, not read here: read here after it died, it would be the process that adopted this one.
    while not watched.poll(_OWNER_CHECK_S) and os.getppid() == owner_process:
        pass
    os._exit(0)


def _pass_stop_signals_on(parent: int) -> None:
    while True:
        received = signal.sigwaitinfo(STOP_SIGNALS)
        if received.si_pid == parent:
            os._exit(0)
        if received.si_code != _SENT_BY_KERNEL and os.getppid() == parent:  # not to whoever adopted an orphan
            os.kill(parent, received.si_signo)
