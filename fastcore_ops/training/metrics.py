"""A run's record: one JSON line per evaluation (``metrics.jsonl``) and a PNG of its metric and losses against time.

    >>> import tempfile
    >>> log = MetricsLog(Path(tempfile.mkdtemp()), metric="top1", metric_label="top-1 (%)")
    >>> log.append({"epoch": 1, "step": 50, "train_seconds": 12.5, "top1": 0.41, "eval_loss": 1.7, "train_loss": 1.9})
    >>> log.plot().name                                            # beside metrics.jsonl
    'curves.png'
"""

from __future__ import annotations

import json
from pathlib import Path

from fastcore_ops.training.figures import plt, save_figure
from fastcore_ops.training.tensorboard_events import TensorBoardEvents


class MetricsLog:
    """Appends rows to ``<out>/metrics.jsonl``; rows already there (from before a resume) are kept.

    metric, metric_label: the task's headline metric, plotted beside the losses (as a percentage
    when its label says "%").
    tensorboard: also write each row as TensorBoard event files in ``out``
    (:class:`fastcore_ops.training.tensorboard_events.TensorBoardEvents`).
    """

    def __init__(self, out: Path, *, metric: str, metric_label: str, tensorboard: bool = False):
        self.metric, self.metric_label = metric, metric_label
        self.path = out / "metrics.jsonl"
        self.rows: list[dict] = []
        if self.path.is_file():
            self.rows = [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]
        self.tensorboard, self.resumed_at, self._events = tensorboard, None, None

    def truncate_after(self, step: int) -> None:
        """Forget rows past ``step`` (written after the checkpoint a resumed run starts from)."""
        self.rows = [row for row in self.rows if row["step"] <= step]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("".join(json.dumps(row) + "\n" for row in self.rows))
        self.resumed_at = step

    def append(self, row: dict) -> None:
        self.rows.append(row)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as file:
            file.write(json.dumps(row) + "\n")
        if self.tensorboard:
            if self._events is None:  # at the first row: a run that fails before it leaves no event file
                self._events = TensorBoardEvents(self.path.parent, purge_after=self.resumed_at)
            self._events.write(row)

    def close(self) -> None:
        """Close the TensorBoard event file, if one is open."""
        if self._events is not None:
            self._events.close()
            self._events = None

    def plot(self) -> Path:
        """The metric and the losses against training time (evaluation and checkpoints excluded), to ``curves.png``."""
        path = self.path.with_name("curves.png")
        save_figure(curves_figure(self.rows, self.metric, self.metric_label), path)
        return path


def curves_figure(rows: list[dict], metric: str, metric_label: str):
    """The run's metric and losses against training time: in seconds for a run under two minutes, from zero, so
    that one evaluation is a point on a readable axis, not on one of hundredths of a minute."""
    longest = max((row["train_seconds"] for row in rows), default=0.0)
    unit, per = ("min", 60.0) if longest >= 120 else ("s", 1.0)
    times = [row["train_seconds"] / per for row in rows]
    scale = 100 if "%" in metric_label else 1
    figure, (metric_axes, loss_axes) = plt.subplots(1, 2, figsize=(10, 4))
    metric_axes.plot(times, [scale * row[metric] for row in rows], marker="o")
    metric_axes.set(xlabel=f"training time ({unit})", ylabel=metric_label, title="evaluation")
    loss_axes.plot(times, [row["train_loss"] for row in rows], marker="o", label="train (its own loss)")
    loss_axes.plot(times, [row["eval_loss"] for row in rows], marker="o", label="eval (the task's eval_loss)")
    loss_axes.set(xlabel=f"training time ({unit})", ylabel="loss", title="loss")
    loss_axes.legend()
    for axes in (metric_axes, loss_axes):
        axes.set_xlim(0, 1.1 * max(times, default=0.0) or 1.0)
        axes.grid(alpha=0.3)
    figure.tight_layout()
    return figure
