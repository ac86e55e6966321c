"""A run's evaluations as TensorBoard event files, beside ``metrics.jsonl``, for readers who look there.

Written by ``torch.utils.tensorboard`` (which needs the ``tensorboard`` package) into the run's
folder itself, so ``tensorboard --logdir runs/`` shows every run under its folder's name. The
event files' names hold the time and the process, so a run never writes over a file it did not
write. A resumed run purges the events after the step it resumed from, as ``metrics.jsonl``
forgets those rows.

    >>> import tempfile
    >>> events = TensorBoardEvents(Path(tempfile.mkdtemp()))
    >>> events.write({"epoch": 1, "step": 50, "train_loss": 1.9, "top1": 0.41, "eval_loss": 1.7, "lr": 0.1,
    ...               "samples_per_second": 812.5, "train_seconds": 12.5, "phase_seconds": {"forward": 4.0}})
    >>> sorted(events.tags_written)
    ['eval/eval_loss', 'eval/top1', 'loss/train', 'time/forward', 'time/train_seconds', 'train/lr', 'train/samples_per_second']
    >>> events.close()
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

# A row's fields that are not metrics, by the tag TensorBoard shows them under; every other number is a metric.
_TRAINING_TAGS = {"train_loss": "loss/train", "lr": "train/lr", "samples_per_second": "train/samples_per_second",
                  "train_seconds": "time/train_seconds"}
_NOT_SCALARS = ("epoch", "step", "phase_seconds")


def tensorboard_missing() -> str | None:
    """Why event files cannot be written here (the fix included), or None when they can."""
    if importlib.util.find_spec("tensorboard") is None:
        return "the tensorboard package is not installed; pip install tensorboard"
    return None


class TensorBoardEvents:
    """Writes each evaluation row of a run (see :class:`fastcore_ops.training.metrics.MetricsLog`) as scalars at its step.

    purge_after: the step a resumed run starts from; events written after it by the stopped run are dropped.
    """

    def __init__(self, folder: Path, *, purge_after: int | None = None):
        problem = tensorboard_missing()
        if problem is not None:
            raise ValueError(f"TensorBoard event files: {problem}")
        from torch.utils.tensorboard import SummaryWriter  # imports tensorboard: only when asked for

        self._writer = SummaryWriter(log_dir=str(folder), purge_step=None if purge_after is None else purge_after + 1)
        self.tags_written: set[str] = set()

    def write(self, row: dict) -> None:
        """Every number in ``row``: training fields, each phase's seconds (``time/<phase>``) and the metrics."""
        step = row["step"]
        scalars = {_TRAINING_TAGS.get(name, f"eval/{name}"): value for name, value in row.items()
                   if name not in _NOT_SCALARS and isinstance(value, (int, float)) and not isinstance(value, bool)}
        scalars |= {f"time/{phase}": seconds for phase, seconds in row.get("phase_seconds", {}).items()}
        for tag, value in scalars.items():
            self._writer.add_scalar(tag, value, global_step=step)
        self.tags_written |= set(scalars)
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()
