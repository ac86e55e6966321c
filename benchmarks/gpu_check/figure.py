"""The GPU check's kernel plot: each kernel's forward+backward speed-up beside the goal it was built for."""

from __future__ import annotations

from pathlib import Path

from fastcore_ops.training.figures import plt, save_figure


def plot_kernel_speedups(rows: list[dict], title: str, path: Path) -> None:
    """One bar per timed case on a log axis (1 = parity), its goal as a black tick; green meets it, red misses
    it, grey where no goal is judged (the small mode)."""
    labels = [f"{row['kernel']} {row['size']} {row['dtype']}" for row in rows]
    speedups = [row["fwd_bwd_speedup"] for row in rows]
    colours = ["tab:gray" if row["meets_goal"] is None else "tab:green" if row["meets_goal"] else "tab:red"
               for row in rows]
    figure, axes = plt.subplots(figsize=(9, 0.3 * len(rows) + 1.4))
    positions = range(len(rows))
    axes.barh(positions, speedups, color=colours)
    axes.scatter([row["goal"] for row in rows], positions, marker="|", s=200, color="black", zorder=3)
    axes.axvline(1.0, color="black", linewidth=0.8)
    axes.set_xscale("log")
    axes.set_yticks(list(positions), labels, fontsize=8)
    axes.invert_yaxis()
    axes.set_xlabel("forward+backward speed-up over the PyTorch ops it replaces (log; 1 = parity; | = its goal)")
    axes.set_title(title)
    figure.tight_layout()
    save_figure(figure, path)
