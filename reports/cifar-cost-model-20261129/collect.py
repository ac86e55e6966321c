"""Turn run folders of ``step_times.py`` into one sweep's output folder, which ``--cost`` can price.

    PYTHONPATH=. python reports/cifar-cost-model-20261129/collect.py OUT RUN...

Copies each run's small files (not its checkpoints) to ``OUT/runs/<recipe>-x<budget>-s<seed>/`` and
writes ``OUT/results.json`` as ``python -m training.tradeoff`` would have. A run's recipe, budget
(its scale-schedule ratio) and seed are read from its ``config.json``.
"""

import shutil
import sys
from pathlib import Path

from training.config import load_config
from training.tradeoff.planning import RUNS, PlannedRun
from training.tradeoff.results import read_run, write_results

KEPT = ("config.json", "run.json", "summary.json", "metrics.jsonl", "machine.txt", "steps.json")


def collect(out: Path, folders: list[Path]) -> None:
    records = []
    for folder in folders:
        config = load_config(folder / "config.json")
        planned = PlannedRun(config.name, config.schedule.scale_schedule_ratio, config.seed, 0.0)
        target = out / RUNS / planned.folder_name
        target.mkdir(parents=True, exist_ok=False)
        for name in KEPT:
            shutil.copy2(folder / name, target / name)
        records.append(read_run(target, recipe=planned.recipe, budget=planned.budget, seed=planned.seed))
    write_results(records, out)


def main(argv: list[str]) -> None:
    collect(Path(argv[0]), [Path(folder) for folder in argv[1:]])


if __name__ == "__main__":
    main(sys.argv[1:])
