"""The pil backend's decoding workers and stop signals: passed on once to the process reading the batches,
never dying of one, and a worker that died anyway does not hang the loader's close."""

import fcntl
import json
import multiprocessing
import os
import pty
import signal
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

from fastcore_ops.data import build_loader
from fastcore_ops.data.backends.workers.worker_stop import STOP_SIGNALS, WorkerStop, in_worker, starting_workers
from tests.hang_guard import HANG_GUARD_S, run_guarded, still_running

ROOT = Path(__file__).resolve().parents[4]

# How long the child waits after a signal for copies of it before it reports the burst: the workers pass theirs
# on within milliseconds. A copy that comes later (a busy machine) lands in the next burst, or in what is left at
# the end, and is counted there for the route whose signal it is: the routes alternate SIGTERM and SIGINT.
ECHO_WAIT = 0.5
ROUTES = 4  # the signals the test sends the child, one after the other


def test_a_stop_signal_reaches_the_process_reading_the_batches_once_by_every_route_and_the_workers_go_on(coded_tree):
    tree = coded_tree(classes=2, per_class=6)
    terminal, child_terminal = pty.openpty()
    child = subprocess.Popen([sys.executable, "-m", "tests.data.backends.workers.test_worker_stop", str(tree)],
                             cwd=ROOT, stdin=child_terminal, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    os.close(child_terminal)
    # A signal lost on the way leaves the child waiting and its workers holding stdout open: end them all.
    hang_guard = threading.Timer(HANG_GUARD_S, os.killpg, (child.pid, signal.SIGKILL))
    hang_guard.start()
    try:
        workers = json.loads(child.stdout.readline() or "null")
        assert workers and len(workers) == 2, child.communicate(timeout=HANG_GUARD_S)[1]
        routes = [lambda: os.kill(workers[0], signal.SIGTERM),  # a worker alone: passed on
                  lambda: os.kill(workers[1], signal.SIGINT),
                  lambda: os.killpg(child.pid, signal.SIGTERM),  # the group: there, and from each worker
                  lambda: os.write(terminal, b"\x03")]  # Ctrl-C: the kernel signals the group; not passed on
        assert len(routes) == ROUTES
        received = []
        for send in routes:
            send()
            received.append(json.loads(child.stdout.readline()))
        batches, left, late = json.loads(child.stdout.readline())
        assert child.wait(timeout=HANG_GUARD_S) == 0, child.stderr.read()
    finally:
        hang_guard.cancel()
        child.kill()
        os.close(terminal)
    # A route's copies are its signal's in its burst and any later one before the next route of that signal.
    bursts = [*received, late]
    sent = (signal.SIGTERM, signal.SIGINT, signal.SIGTERM, signal.SIGINT)
    by_route = [[number for burst in bursts[i:i + 2 if i + 2 < ROUTES else None] for number in burst if number == signo]
                for i, signo in enumerate(sent)]
    assert sorted(number for burst in bursts for number in burst) == sorted(sum(by_route, [])), bursts
    assert by_route[:2] == [[signal.SIGTERM], [signal.SIGINT]], bursts
    # Each worker passes the group's signal on too (copies that reach Python's handler together merge).
    assert 1 <= len(by_route[2]) <= 3, bursts
    assert by_route[3] == [signal.SIGINT], "a Ctrl-C reached the process once, from the terminal"
    assert batches == 12 // 2, "the workers went on decoding: the epoch is whole"
    assert left == [], "close() let every worker go"


def _child(tree: str) -> None:
    """The process the test signals: reads one batch, then reports each burst of stop signals it receives."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)  # the pseudo-terminal on stdin becomes this session's terminal
    received = []
    for number in STOP_SIGNALS:
        signal.signal(number, lambda number, frame: received.append(number))
    loader = build_loader(tree, batch_size=2, train=False, image_size=16, backend="pil", num_workers=2)
    batches = iter(loader)
    next(batches)
    print(json.dumps(sorted(child.pid for child in multiprocessing.active_children())), flush=True)
    for _ in range(ROUTES):
        while not received:
            time.sleep(0.01)
        time.sleep(ECHO_WAIT)
        # Taken out before it is printed: the test sends the next signal as soon as it reads the line, and one
        # arriving between a print and a clear() was lost, leaving this loop waiting for it (a CI hang).
        burst = received[:]
        del received[:len(burst)]
        print(json.dumps(burst), flush=True)
    count = 1 + sum(1 for _ in batches)
    loader.close()
    left = [child.pid for child in multiprocessing.active_children()]
    print(json.dumps([count, left, received]), flush=True)


def _watch_until_killed(watched, watching) -> None:
    in_worker(watched, os.getppid())
    watching.set()
    time.sleep(600)


def test_a_worker_that_died_does_not_hang_telling_the_others_to_leave():
    # A multiprocessing.Event here waited forever for the dead worker to wake (the hang at the end of
    # a run whose workers a SIGTERM to the process group had killed).
    owner = type("Backend", (), {})()
    stop = WorkerStop(owner)
    context = multiprocessing.get_context("fork")
    watching = [context.Event() for _ in range(2)]
    dead, alive = (context.Process(target=_watch_until_killed, args=(stop.watched, event)) for event in watching)
    dead.start()
    alive.start()
    assert all(event.wait(timeout=HANG_GUARD_S) for event in watching), "both watch the pipe"
    os.kill(dead.pid, signal.SIGKILL)
    dead.join()
    telling = threading.Thread(target=stop.stop, daemon=True)
    telling.start()
    telling.join(timeout=HANG_GUARD_S)  # a guard against the hang this test is about, not a time it must beat
    assert not telling.is_alive(), "stop() hangs on the dead worker"
    alive.join(timeout=HANG_GUARD_S)
    assert alive.exitcode == 0, "the living worker left when told"


def _start_when_told(watched, started, go) -> None:
    """A worker that is slow to start: alive, but not yet passing stop signals on until ``go`` is set."""
    started.set()
    go.wait(HANG_GUARD_S)
    in_worker(watched, os.getppid())
    time.sleep(600)


def _start_a_worker_slowly(test) -> None:
    """The process reading batches: starts a worker inside starting_workers, tells ``test`` its pid, lets it
    start when ``test`` has signalled it, and reports the stop signals that reached this process."""
    received = []
    signal.signal(signal.SIGTERM, lambda number, frame: received.append(number))
    context = multiprocessing.get_context("fork")
    owner = type("Backend", (), {})()
    stop = WorkerStop(owner)
    started, go = context.Event(), context.Event()
    with starting_workers():
        worker = context.Process(target=_start_when_told, args=(stop.watched, started, go))
        worker.start()
    started.wait(HANG_GUARD_S)
    test.send(worker.pid)
    test.recv()  # signalled (by the test: one from this process would tell the worker to leave)
    go.set()
    waited = 0.0
    while not received and waited < HANG_GUARD_S:  # a signal lost never comes: this ends the wait
        time.sleep(0.01)
        waited += 0.01
    stop.stop()
    worker.join()
    test.send((received, worker.exitcode))


def test_a_stop_signal_sent_to_a_worker_before_it_is_ready_is_passed_on_when_it_is():
    # A worker PyTorch had forked but that had not yet run in_worker ran the handler it inherited: the signal was
    # lost in its copy of this process, and the process reading the batches waited for it forever (a CI hang).
    context = multiprocessing.get_context("fork")
    test, reader_end = context.Pipe()
    reader = context.Process(target=_start_a_worker_slowly, args=(reader_end,))
    reader.start()
    reader_end.close()  # the reader's alone now: if it dies, recv() ends
    os.kill(test.recv(), signal.SIGTERM)
    test.send("signalled")
    received, worker_exit = test.recv()
    reader.join()
    assert received == [signal.SIGTERM], "the early signal reached the process reading the batches, once"
    assert worker_exit == 0, "the worker went on and left when told"


# A process killed while its decoding worker starts: the worker kills it at its start, before PyTorch's watchdog in
# the worker reads the worker's parent (after the start), so that watchdog watches the process that adopted it.
_KILLED_WHILE_ITS_WORKER_STARTS = """
import os, signal, sys, time
from fastcore_ops.data import build_loader
from fastcore_ops.data.backends import pil
started = pil.keep_freed_memory
def start_after_killing_the_parent():
    print(os.getpid(), flush=True)
    os.kill(os.getppid(), signal.SIGKILL)
    time.sleep(1)  # the parent is gone, the worker adopted, before PyTorch's watchdog starts
    started()
pil.keep_freed_memory = start_after_killing_the_parent
next(iter(build_loader(sys.argv[1], batch_size=2, train=False, image_size=16, backend="pil", num_workers=1)))
"""


def test_a_worker_whose_process_was_killed_while_it_started_leaves(coded_tree):
    # Such a worker lived on, idle, holding the run's output pipes open: found after a test that kills a run.
    tree = coded_tree(classes=2, per_class=2)
    killed = run_guarded([sys.executable, "-c", _KILLED_WHILE_ITS_WORKER_STARTS, str(tree)], cwd=ROOT)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    (worker,) = map(int, killed.stdout.split())  # it held stdout open: the command ended as the worker left
    # Its exit closes the pipe a moment before the process is gone: CI once looked within that moment.
    assert still_running([worker]) == []


if __name__ == "__main__":
    _child(sys.argv[1])
