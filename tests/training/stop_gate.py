"""Imported into a training run by the tests that stop one (``--import tests.training.stop_gate``: ``HELD`` in
tests/training/test_train.py), never into the tests' own process: after its first checkpoint the run holds, at the
end of its next step, until a stop signal has arrived.

Without it such a test raced the run: it waits for a checkpoint, then signals, and on a busy machine a run of a
few dozen small steps had finished training (its evaluation's decoding workers starting) before the test's signal
was sent. Held, the signal lands mid-run however late the test's process gets to send it. A SIGKILL ends the
run where it holds; a run that no signal reaches goes on after :data:`tests.hang_guard.HANG_GUARD_S`, and its test
fails on its own. Each rank of a torchrun job holds until its own signal arrives. The hold changes nothing the run
computes or saves, so the resumed run (without the import) matches a run never stopped.
"""

import time

from fastcore_ops.training.trainer import Trainer
from tests.hang_guard import HANG_GUARD_S

_save_checkpoint, _stop_and_checkpoint = Trainer.save_checkpoint, Trainer._stop_and_checkpoint
_progress = {"saved": False, "held": False}


def _save_checkpoint_noted(self, *args, **kwargs):
    _save_checkpoint(self, *args, **kwargs)
    _progress["saved"] = True


def _stop_and_checkpoint_held(self, stops):
    if _progress["saved"] and not _progress["held"]:
        _progress["held"] = True
        deadline = time.monotonic() + HANG_GUARD_S
        while stops.requested is None and time.monotonic() < deadline:
            time.sleep(0.01)  # the signal's handler runs meanwhile, in this thread
    return _stop_and_checkpoint(self, stops)


Trainer.save_checkpoint, Trainer._stop_and_checkpoint = _save_checkpoint_noted, _stop_and_checkpoint_held
