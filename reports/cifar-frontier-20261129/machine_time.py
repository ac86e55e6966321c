"""What issue 50's accuracy runs cost in machine time, from the sweeps' own ``results.json``.

    M=reports/cifar-mild-methods-20261128
    PYTHONPATH=. python reports/cifar-frontier-20261129/machine_time.py reports/cifar-baseline-long-20261128/measured \
        $M/ablation-a $M/ablation-b $M/label-smoothing-0.04 $M/tta-heldout $M/tta-low-s2 $M/tta-low-s3 \
        reports/cifar-frontier-20261129/pieces/* > reports/cifar-frontier-20261129/machine-time.md

Each run's ``train_seconds`` is its wall-clock training time as it ran: at 1 thread, two runs at a
time on a 2-core VM, beside other work, and including any time it was paused (``SIGSTOP``) while a
sitting had the machine alone. A lane-hour is an hour of one such run; two lanes share the
machine, so the machine-hours are half the lane-hours. Prints a Markdown table: one row per
sweep folder, then the total.
"""

import sys
from pathlib import Path

from fastcore_ops.training.tradeoff.results import RunRecord, read_results


def lane_hours(folder: Path) -> tuple[int, float]:
    """Number of finished runs in a sweep folder and their summed training hours."""
    finished = [run for run in read_results(folder) if isinstance(run, RunRecord)]
    return len(finished), sum(run.train_seconds for run in finished) / 3600


def main(folders: list[str]) -> int:
    """Print the table; 2 with one ``error:`` line (and nothing printed) for no folder or a folder without runs."""
    if not folders:
        print("error: usage: machine_time.py SWEEP_FOLDER...", file=sys.stderr)
        return 2
    try:
        counted = [(folder, *lane_hours(Path(folder))) for folder in folders]
    except (ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print("| sweep folder | runs | lane-hours |")
    print("|---|---|---|")
    for folder, runs, hours in counted:
        print(f"| `{folder}` | {runs} | {hours:.2f} |")
    total_runs, total_hours = sum(runs for _, runs, _ in counted), sum(hours for _, _, hours in counted)
    machine_hours = f"{total_hours / 2:.1f} machine-hours, two lanes at a time"
    print(f"| **all** | **{total_runs}** | **{total_hours:.1f}** ({machine_hours}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
