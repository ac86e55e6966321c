"""A run's record: one JSON line per epoch (``metrics.jsonl``) and a PNG of accuracy and loss against time.

    >>> import tempfile
    >>> log = MetricsLog(Path(tempfile.mkdtemp()))
    >>> log.append({"epoch": 1, "step": 50, "train_seconds": 12.5, "top1": 0.41, "eval_loss": 1.7, "train_loss": 1.9})
    >>> log.plot().name                                            # beside metrics.jsonl
    'curves.png'
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on servers and CI
import matplotlib.pyplot as plt  # noqa: E402


class MetricsLog:
    """Appends rows to ``<out>/metrics.jsonl``; rows already there (from before a resume) are kept."""

    def __init__(self, out: Path):
        self.path = out / "metrics.jsonl"
        self.rows: list[dict] = []
        if self.path.is_file():
            self.rows = [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]

    def truncate_after(self, step: int) -> None:
        """Forget rows past ``step`` (written after the checkpoint a resumed run starts from)."""
        self.rows = [row for row in self.rows if row["step"] <= step]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("".join(json.dumps(row) + "\n" for row in self.rows))

    def append(self, row: dict) -> None:
        self.rows.append(row)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as file:
            file.write(json.dumps(row) + "\n")

    def plot(self) -> Path:
        """Top-1 and losses against training time (evaluation and checkpoints excluded), to ``curves.png``."""
        path = self.path.with_name("curves.png")
        minutes = [row["train_seconds"] / 60 for row in self.rows]
        figure, (accuracy_axes, loss_axes) = plt.subplots(1, 2, figsize=(10, 4))
        accuracy_axes.plot(minutes, [100 * row["top1"] for row in self.rows], marker="o")
        accuracy_axes.set(xlabel="training time (min)", ylabel="top-1 (%)", title="evaluation accuracy")
        loss_axes.plot(minutes, [row["train_loss"] for row in self.rows], marker="o", label="train (its own loss)")
        loss_axes.plot(minutes, [row["eval_loss"] for row in self.rows], marker="o", label="eval (cross-entropy)")
        loss_axes.set(xlabel="training time (min)", ylabel="loss", title="loss")
        loss_axes.legend()
        for axes in (accuracy_axes, loss_axes):
            axes.grid(alpha=0.3)
        figure.tight_layout()
        figure.savefig(path, dpi=120)
        plt.close(figure)
        return path
