"""``python -m fastcore_ops.training.tradeoff --adopt RUN...``: finished runs of ``python -m fastcore_ops.training.train``
taken into a tradeoff folder (:func:`adopt_command`), so that ``--merge`` and ``--cost`` take them beside a sweep's.

Each run is named by its own ``config.json``: its recipe, budget (``schedule.scale_schedule_ratio``) and seed. Its
``config.json`` and ``summary.json``, and the machine label where a sweep wrote one, are copied into
``OUT/runs/<recipe>-x<budget>-s<seed>/`` (nothing else: checkpoints stay where they are), its row joins
``OUT/results.json``, and the report is written as ``--merge`` writes it.

    python -m fastcore_ops.training.tradeoff --adopt runs/record-seed-3 runs/record-seed-4 --out reports/record-x1
"""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Sequence
from pathlib import Path

from fastcore_ops.cli import refuse
from fastcore_ops.training.config import load_config
from fastcore_ops.training.run_folder import CONFIG_NAME, SUMMARY_NAME
from fastcore_ops.training.tradeoff.machine import MACHINE_FILE
from fastcore_ops.training.tradeoff.options import choose_baseline, claim_out
from fastcore_ops.training.tradeoff.planning import RUNS, PlannedRun, name_problem
from fastcore_ops.training.tradeoff.report import build_report
from fastcore_ops.training.tradeoff.results import RESULTS_JSON, RunRecord, read_run


def adopted_run(folder: Path) -> tuple[PlannedRun, RunRecord]:
    """The run in ``folder`` as a sweep would have planned it, with its record; ValueError (naming the folder) when
    it has not finished, its files are not a run's, or its recipe is no plain name (it names the run's folder)."""
    config = load_config(folder / CONFIG_NAME)
    run = PlannedRun(config.name, config.schedule.scale_schedule_ratio, config.seed, 0.0)
    problem = name_problem(run.recipe)
    if problem is not None:
        raise ValueError(f"--adopt {folder}: the recipe {run.recipe!r} in its {CONFIG_NAME} {problem}; it names the "
                         f"run's folder under {RUNS}/")
    try:
        record = read_run(folder, recipe=run.recipe, budget=run.budget, seed=run.seed)
    except FileNotFoundError as error:
        raise ValueError(f"--adopt {error}; pass finished runs") from None
    return run, record


def adopt_runs(folders: Sequence[Path], out: Path, baseline: str | None) -> list[Path]:
    """Every run of ``folders`` into the tradeoff folder ``out`` (see the module's doc); the report's files.

    Everything is checked before anything is written: ValueError when a run cannot be adopted
    (:func:`adopted_run`), two are the same recipe, budget and seed, ``out`` already holds results (adopt into a
    new folder, then ``--merge`` the two), or is not this tool's to write into.

        >>> adopt_runs([Path("runs/record-seed-3")], Path("reports/record-x1"), None)  # doctest: +SKIP
    """
    adopted = [adopted_run(folder) for folder in folders]
    names = [run.folder_name for run, _ in adopted]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"--adopt: more than one run is {', '.join(repeated)}; adopt each recipe, budget and seed "
                         f"once")
    if (out / RESULTS_JSON).exists() or (out / RUNS).exists():
        raise ValueError(f"--out {out} already holds runs; adopt into a new folder, then --merge the two")
    records = [record for _, record in adopted]
    chosen = choose_baseline(baseline, list(dict.fromkeys(record.recipe for record in records)))
    claim_out(out, "tradeoff")  # the last check: it marks --out
    for folder, name in zip(folders, names):
        target = out / RUNS / name
        target.mkdir(parents=True)
        for file_name in (CONFIG_NAME, SUMMARY_NAME, MACHINE_FILE):
            if (folder / file_name).is_file():
                shutil.copyfile(folder / file_name, target / file_name)
    return build_report(records, out, chosen)  # results.json and .csv with it


def adopt_command(args: argparse.Namespace) -> int:
    """``--adopt RUN...`` of a parsed command line: :func:`adopt_runs`, then where its report is; the exit code (2
    with one ``error:`` line, nothing written, when a run cannot be adopted)."""
    try:
        written = adopt_runs(args.adopt, args.out, args.baseline)
    except (ValueError, OSError) as error:
        return refuse(error)
    print(f"report: {written[-1]} ({len(args.adopt)} runs adopted into {args.out / RUNS}; tables and figures next "
          f"to it)")
    return 0
