"""Turn run folders of ``step_times.py`` into one sweep's output folder, which ``--cost`` can price.

    PYTHONPATH=. python reports/cifar-cost-model-20261129/collect.py OUT RUN...

Copies each run's small files (not its checkpoints) to ``OUT/runs/<recipe>-x<budget>-s<seed>/`` and
writes ``OUT/results.json`` as ``python -m fastcore_ops.training.tradeoff`` would have. A run's recipe, budget
(its scale-schedule ratio) and seed are read from its ``config.json``.
"""

import shutil
import sys
from pathlib import Path

from fastcore_ops.training.config import load_config
from fastcore_ops.training.tradeoff.planning import RUNS, PlannedRun, name_problem
from fastcore_ops.training.tradeoff.results import read_run, write_results

KEPT = ("config.json", "run.json", "summary.json", "metrics.jsonl", "machine.txt", "steps.json")


def planned_run(folder: Path) -> PlannedRun:
    """The run ``folder`` trained, from its config.json (untrusted: its name becomes a folder's under ``OUT/runs/``, so
    it must be a plain name); ValueError naming the file."""
    path = folder / "config.json"
    config = load_config(path)
    problem = name_problem(config.name)
    if problem is not None:
        raise ValueError(f"{path}: name {config.name!r} {problem}; it names the run's folder under OUT/{RUNS}/, which "
                         f"is never written outside OUT: pass folders step_times.py trained")
    return PlannedRun(config.name, config.schedule.scale_schedule_ratio, config.seed, 0.0)


def collect(out: Path, folders: list[Path]) -> None:
    """Check every run first, then copy them into ``out``, which must not exist yet; ValueError naming the problem."""
    if out.exists():
        raise ValueError(f"{out} exists; name a new folder")
    planned = []
    for folder in folders:
        run = planned_run(folder)
        read_run(folder, recipe=run.recipe, budget=run.budget, seed=run.seed)  # a finished run, its summary sound
        missing = [name for name in KEPT if not (folder / name).is_file()]
        if missing:
            raise ValueError(f"{folder}: no {', '.join(missing)}; pass folders step_times.py trained")
        planned.append((folder, run))
    names = [run.folder_name for _, run in planned]
    if len(set(names)) < len(names):
        raise ValueError(f"two runs share a recipe, budget and seed ({', '.join(names)}); collect them apart")
    records = []
    for folder, run in planned:
        target = out / RUNS / run.folder_name
        target.mkdir(parents=True)
        for name in KEPT:
            shutil.copy2(folder / name, target / name)
        records.append(read_run(target, recipe=run.recipe, budget=run.budget, seed=run.seed))
    write_results(records, out)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("error: usage: collect.py OUT RUN...", file=sys.stderr)
        return 2
    try:
        collect(Path(argv[0]), [Path(folder) for folder in argv[1:]])
    except (ValueError, TypeError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
