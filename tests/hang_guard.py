"""The one wall-clock limit the suite sets: how long a child process or a wait may take before the test calls it
hung. No test's pass depends on how fast the machine is (a slow CPU, a busy box); this only ends a real hang
before pytest-timeout's own guard (pytest.ini) does, with the test's own message.

    >>> HANG_GUARD_S >= 10 * 60
    True

:func:`run_guarded` runs a child that starts children of its own (torchrun and its ranks, their decoding workers):
where it hangs, the failure shows where each of them stood, the next time as well as this one.
"""

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

# Some ten times the slowest child the suite starts on an idle AVX2 CPU (a recipe fingerprint, 1-2 minutes).
HANG_GUARD_S = 900
# How long each process of a hung tree is given to print its stacks before the next is asked: they share the
# stderr pipe, and faulthandler writes a stack in many small writes, so stacks asked for together interleave.
_DUMP_WAIT_S = 1


def processes() -> dict[int, tuple[int, str, str]]:
    """Every process on the machine: {pid: (parent pid, start time, name)}."""
    found = {}
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text() if entry.name.isdigit() else None
        except OSError:  # gone meanwhile
            stat = None
        if stat is None:
            continue
        name, fields = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
        found[int(entry.name)] = (int(fields[1]), fields[19], name)
    return found


def descendants(pid: int) -> dict[int, tuple[str, str]]:
    """The processes ``pid`` started, and theirs: {pid: (start time, name)}.

        >>> import sys
        >>> child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        >>> child.pid in descendants(os.getpid())
        True
        >>> child.kill(); child.wait()
        -9
    """
    every, found, parents = processes(), {}, {pid}
    while parents:
        children = {child for child, (parent, _, _) in every.items() if parent in parents and child not in found}
        found.update({child: every[child][1:] for child in children})
        parents = children
    return found


def is_running(pid: int) -> bool:
    """Whether process ``pid`` is alive: it exists and is not a zombie (one that has ended, waiting to be reaped).

        >>> is_running(os.getpid())
        True
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat[stat.rindex(")") + 2:].split()[0] != "Z"


def still_running(pids) -> list[int]:
    """Those of ``pids`` still running once each has ended, or after HANG_GUARD_S: a guard, not a time to beat.

        >>> import sys
        >>> child = subprocess.Popen([sys.executable, "-c", "pass"])
        >>> still_running([child.pid]), child.wait()  # ended: a zombie, not yet reaped, counts as ended
        ([], 0)
    """
    deadline = time.monotonic() + HANG_GUARD_S
    while any(is_running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [pid for pid in pids if is_running(pid)]


def holding(pipes) -> set[int]:
    """The other processes that hold one of ``pipes`` (this process's ends of pipes) open: a read waits for them all.

        >>> import sys
        >>> child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], stdout=subprocess.PIPE)
        >>> holding([child.stdout]) == {child.pid}
        True
        >>> child.kill(); child.wait()
        -9
    """
    wanted = {f"pipe:[{os.fstat(pipe.fileno()).st_ino}]" for pipe in pipes}
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):  # gone meanwhile, or not ours to read
            if any(os.readlink(descriptor) in wanted for descriptor in (entry / "fd").iterdir()):
                found.add(int(entry.name))
    return found


def _signal_all(pids, number: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, number)


def run_guarded(command: list[str], *, timeout: float = HANG_GUARD_S, **popen) -> subprocess.CompletedProcess:
    """``subprocess.run(command, capture_output=True, text=True, **popen)`` that fails the test where the command is
    still running after ``timeout`` seconds, with the Python stack of every thread of each of its processes.

    Every process of the tree, and any other that holds the command's output pipes open (a child that outlived
    its parent: the command then waits for it), is asked for its stacks with SIGABRT (PYTHONFAULTHANDLER prints
    them), then killed: nothing of a hung run is left behind. ``subprocess.run``'s own timeout kills the command
    alone, silently, and then waits for whatever holds its pipes.

        >>> import sys
        >>> run_guarded([sys.executable, "-c", "print(6 * 7)"]).stdout
        '42\\n'
    """
    environment = {**popen.pop("env", os.environ), "PYTHONFAULTHANDLER": "1"}
    process = subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               **popen)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        every = processes()
        others = (set(descendants(process.pid)) | holding([process.stdout, process.stderr])) - {process.pid}
        tree = {process.pid: "the command", **{pid: every.get(pid, (0, "", "gone"))[2] for pid in sorted(others)}}
        names = ", ".join(f"{pid} {name}" for pid, name in tree.items())
        for pid in tree:
            _signal_all([pid], signal.SIGABRT)
            time.sleep(_DUMP_WAIT_S)
        _signal_all(tree, signal.SIGKILL)
        out, err = process.communicate()
        pytest.fail(f"{' '.join(command)} hung: not done after {timeout:g} s (it, or a process holding its output "
                    f"open). Where each of its processes stood, in this order ({names}; stderr's end):\n"
                    f"{err[-30000:]}\nstdout's end:\n{out[-3000:]}", pytrace=False)
    return subprocess.CompletedProcess(command, process.returncode, out, err)
