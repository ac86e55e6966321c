"""Each epoch of runs that kept their step times (``step_times.py``), measured beside what the cost pass models.

    PYTHONPATH=. python reports/cifar-cost-model-20261129/by_epoch.py COSTS_JSON SWEEP... \
        --data ../shared/datasets/cifar10-jpeg > by-epoch.md

For every run under ``SWEEP/runs/`` with a ``steps.json``: its plan (the cost pass's own,
``fastcore_ops.training.tradeoff.step_kinds.plan_run``), each step's modelled seconds (its kind's time with
images kept, plus the share of its images decoded afresh times the extra a decoded step costs),
per epoch the measured and modelled sums, and per kind of step and share of images decoded
the mean of its steady steps (an epoch's first few left out) measured and modelled. The modelled
epochs leave start-up costs out (a new image size's, an epoch's, the setup: shown once per run);
the measured ones hold them in their first steps. Prints markdown.
"""

import argparse
import json
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

import torch

from fastcore_ops.training.assemble import build_trainer
from fastcore_ops.training.config import setup_hash
from fastcore_ops.training.tradeoff.trained_config import record_config
from fastcore_ops.training.tradeoff.cost_pass import WARMUP_STEPS
from fastcore_ops.training.tradeoff.cost_plans import timed_workers
from fastcore_ops.training.tradeoff.planning import RUNS, PlannedRun
from fastcore_ops.training.tradeoff.results import read_results, split_runs
from fastcore_ops.training.tradeoff.costs_file import read_costs
from fastcore_ops.training.tradeoff.step_kinds import plan_run, step_shares


def modelled_steps(config, costs, data: Path) -> tuple[list[tuple[str, float, float]], int, object]:
    """Each step's kind, share of images decoded and modelled seconds; the steps per epoch; the run's modelled time."""
    trainer = build_trainer(config, data=data, out=None, device=torch.device("cpu"), subset=None, progress=False,
                            eval_every=0)
    try:
        setup = setup_hash(config)
        workers = timed_workers(costs, setup)  # planned as the pass's decoding workers, as --cost --times does
        plan, shares = plan_run(trainer, setup, workers), list(step_shares(trainer, setup, workers))
    finally:
        trainer.train_loader.close()
        trainer.task.close()
    seconds = [(kind.describe(), share, costs.kinds[kind].kept_seconds
                + share * (costs.kinds[kind].decoded_seconds - costs.kinds[kind].kept_seconds))
               for kind, share in shares]
    return seconds, plan.steps_per_epoch, costs.modelled(plan)


def read_steps(path: Path, total_steps: int) -> list[tuple[int, float]]:
    """The (step, seconds) pairs of a ``steps.json``, each checked; ValueError naming the file."""
    try:
        pairs = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError) as error:
        raise ValueError(f"{path}: cannot be read as JSON ({error})") from None
    if not isinstance(pairs, list) or not all(
            isinstance(pair, list) and len(pair) == 2 and type(pair[0]) is int and 0 <= pair[0] < total_steps
            and type(pair[1]) in (int, float) and pair[1] >= 0 for pair in pairs):
        raise ValueError(f"{path}: expected [[step, seconds], ...] with steps below {total_steps}, as "
                         "step_times.py writes it")
    return [(step, float(seconds)) for step, seconds in pairs]


def print_runs(costs_path: Path, sweeps: list[Path], data: Path) -> None:
    """The markdown of every run with a steps.json in ``sweeps`` (see the module's docstring)."""
    costs = read_costs(costs_path)
    records = {(sweep, PlannedRun(record.recipe, record.budget, record.seed, 0.0).folder_name): record
               for sweep in sweeps for record in split_runs(read_results(sweep))[0]}
    print(f"Step times: `{costs_path}` ({costs.machine}). Per epoch, the steps' measured and modelled seconds "
          "(start-up costs apart); per kind and share of images decoded, the mean of its steady steps.\n")
    for folder in sorted(path.parent for sweep in sweeps for path in sweep.glob(f"{RUNS}/*/steps.json")):
        record = records.get((folder.parent.parent, folder.name))
        if record is None:
            raise ValueError(f"{folder}: no finished run of that name in {folder.parent.parent}/results.json")
        modelled, per_epoch, total = modelled_steps(record_config(record, [folder.parent.parent]), costs, data)
        measured_steps = read_steps(folder / "steps.json", len(modelled))
        measured, model, by_kind = Counter(), Counter(), defaultdict(list)
        for step, seconds in measured_steps:
            kind, share, modelled_seconds = modelled[step]
            measured[step // per_epoch] += seconds
            model[step // per_epoch] += modelled_seconds
            if step % per_epoch >= WARMUP_STEPS:
                by_kind[kind, round(share, 3)].append((seconds, modelled_seconds))
        errors = [model[epoch] / measured[epoch] - 1 for epoch in measured]
        print(f"## {folder.parent.parent.name}/{folder.name}: measured {record.train_seconds:.1f} s, "
              f"modelled {total.seconds:.1f} s "
              f"({100 * (total.seconds / record.train_seconds - 1):+.1f}%); epochs off by "
              f"{100 * min(errors):+.1f}% to {100 * max(errors):+.1f}%; starts and setup modelled at "
              f"{total.starts_seconds + total.setup_seconds:.1f} s\n")
        print("| epoch | measured (s) | modelled (s) | error |\n|---|---|---|---|")
        for epoch in sorted(measured):
            print(f"| {epoch + 1} | {measured[epoch]:.1f} | {model[epoch]:.1f} | "
                  f"{100 * (model[epoch] / measured[epoch] - 1):+.1f}% |")
        print("\n| kind | share decoded | steps | measured (ms) | modelled (ms) | error |\n|---|---|---|---|---|---|")
        for (kind, share), pairs in sorted(by_kind.items()):
            mean_measured, mean_modelled = (1000 * statistics.fmean(column) for column in zip(*pairs))
            print(f"| {kind} | {share:.3f} | {len(pairs)} | {mean_measured:.1f} | {mean_modelled:.1f} | "
                  f"{100 * (mean_modelled / mean_measured - 1):+.1f}% |")
        print()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("costs", type=Path)
    parser.add_argument("sweeps", type=Path, nargs="+")
    parser.add_argument("--data", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        print_runs(args.costs, args.sweeps, args.data)
    except (ValueError, TypeError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
