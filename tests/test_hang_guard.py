"""run_guarded: a hung process tree fails its test with every process's stacks, and leaves nothing running."""

import sys

import pytest

from tests.hang_guard import is_running, run_guarded

# A parent that starts a child, each waiting forever in a function named for it; the parent prints the child's pid.
HANGING_TREE = """
import subprocess, sys, time
def parent_waits_forever():
    while True: time.sleep(1)
child = subprocess.Popen([sys.executable, "-c", "import time\\ndef child_waits_forever():\\n    while True: time.sleep(1)\\nchild_waits_forever()"])
print(child.pid, flush=True)
parent_waits_forever()
"""


def test_a_hung_tree_fails_with_each_process_s_stack_and_is_killed():
    with pytest.raises(pytest.fail.Exception) as failed:
        run_guarded([sys.executable, "-c", HANGING_TREE], timeout=5)
    message = str(failed.value)
    assert "hung: still running after 5 s" in message
    # Whole lines, the command's stack first: asked for one process at a time, the stacks do not interleave.
    parent_line, child_line = '"<string>", line 4 in parent_waits_forever', '"<string>", line 3 in child_waits_forever'
    assert parent_line in message and child_line in message, message
    assert message.index(parent_line) < message.index(child_line), message
    child = int(message.rpartition("stdout's end:\n")[2].split()[0])
    assert not is_running(child)


def test_a_finished_command_returns_its_status_and_output():
    finished = run_guarded([sys.executable, "-c", "import sys; print('out'); sys.exit('err')"])
    assert (finished.returncode, finished.stdout, finished.stderr) == (1, "out\n", "err\n")
