"""run_guarded: a hung process tree fails its test with every process's stacks, and leaves nothing running."""

import sys

import pytest

from tests.hang_guard import is_running, run_guarded


def _waits_forever(name: str) -> str:
    """A Python program that waits forever in a function called ``name`` (its line 3)."""
    return f"import time\ndef {name}():\n    while True: time.sleep(1)\n{name}()"


# A parent that starts a child, each waiting forever in a function named for it; the parent prints the child's pid.
HANGING_TREE = f"""
import subprocess, sys, time
def parent_waits_forever():
    while True: time.sleep(1)
child = subprocess.Popen([sys.executable, "-c", {_waits_forever("child_waits_forever")!r}])
print(child.pid, flush=True)
parent_waits_forever()
"""

# A command that ends at once, leaving a child in a session of its own that holds its output open.
LEAVING_A_CHILD = f"""
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", {_waits_forever("orphan_waits_forever")!r}], start_new_session=True)
print(child.pid, flush=True)
"""


# Long enough for the programs above to start and reach their waits on a busy box (they take milliseconds).
HANGS_AFTER_S = 15


def _failure(command: str) -> tuple[str, int]:
    """run_guarded's failure message for ``python -c command`` that hangs, and the pid the command printed."""
    with pytest.raises(pytest.fail.Exception) as failed:
        run_guarded([sys.executable, "-c", command], timeout=HANGS_AFTER_S)
    message = str(failed.value)
    assert f"hung: not done after {HANGS_AFTER_S} s" in message
    return message, int(message.rpartition("stdout's end:\n")[2].split()[0])


def test_a_hung_tree_fails_with_each_process_s_stack_and_is_killed():
    message, child = _failure(HANGING_TREE)
    # Whole lines, the command's stack first: asked for one process at a time, the stacks do not interleave.
    parent_line, child_line = '"<string>", line 4 in parent_waits_forever', '"<string>", line 3 in child_waits_forever'
    assert parent_line in message and child_line in message, message
    assert message.index(parent_line) < message.index(child_line), message
    assert not is_running(child)


def test_a_child_that_outlived_the_command_and_holds_its_output_is_shown_and_killed():
    message, orphan = _failure(LEAVING_A_CHILD)
    assert '"<string>", line 3 in orphan_waits_forever' in message, message
    assert not is_running(orphan)


def test_a_finished_command_returns_its_status_and_output():
    finished = run_guarded([sys.executable, "-c", "import sys; print('out'); sys.exit('err')"])
    assert (finished.returncode, finished.stdout, finished.stderr) == (1, "out\n", "err\n")
