"""Each epoch of runs that kept their step times (``step_times.py``), measured beside what the cost pass models.

    PYTHONPATH=. python reports/cifar-cost-model-20261129/by_epoch.py COSTS_JSON SWEEP... \
        --data ../shared/datasets/cifar10-jpeg > by-epoch.md

For every run under ``SWEEP/runs/`` with a ``steps.json``: its plan (the cost pass's own,
``training.tradeoff.step_kinds.plan_run``), each step's modelled seconds (its kind's time with
images kept, plus the share of its images decoded afresh times the extra a decoded step costs),
per epoch the measured and modelled sums, and per kind of step and share of images decoded
the mean of its steady steps (an epoch's first few left out) measured and modelled. The modelled
epochs leave start-up costs out (a new image size's, an epoch's, the setup: shown once per run);
the measured ones hold them in their first steps. Prints markdown.
"""

import argparse
import json
import statistics
from collections import Counter, defaultdict
from pathlib import Path

import torch

from training.assemble import build_trainer
from training.config import load_config, setup_hash
from training.tradeoff.cost_pass import WARMUP_STEPS, read_costs
from training.tradeoff.step_kinds import decode_share, kind_function, plan_run


def modelled_steps(config, costs, data: Path) -> tuple[dict[int, tuple[str, float, float]], int, object]:
    """Each step's kind, share of images decoded and modelled seconds; the steps per epoch; the run's modelled time."""
    trainer = build_trainer(config, data=data, out=None, device=torch.device("cpu"), subset=None, progress=False,
                            eval_every=0)
    try:
        setup = setup_hash(config)
        plan, kind_at = plan_run(trainer, setup), kind_function(trainer, setup)
        workers = trainer.train_loader.decoding_workers
    finally:
        trainer.train_loader.close()
        trainer.task.close()
    seen_at_size, seconds = Counter(), {}
    for step in range(plan.total_steps):  # as plan_run counts decodes, step by step
        kind = kind_at(step)
        cost = costs.kinds[kind]
        share = decode_share(workers, seen_at_size[kind.image_size] // plan.steps_per_epoch)
        seen_at_size[kind.image_size] += 1
        seconds[step] = (kind.describe(), share, cost.kept_seconds + share * (cost.decoded_seconds - cost.kept_seconds))
    return seconds, plan.steps_per_epoch, costs.modelled(plan)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("costs", type=Path)
    parser.add_argument("sweeps", type=Path, nargs="+")
    parser.add_argument("--data", type=Path, required=True)
    args = parser.parse_args(argv)
    costs = read_costs(args.costs)
    print(f"Step times: `{args.costs}` ({costs.machine}). Per epoch, the steps' measured and modelled seconds "
          "(start-up costs apart); per kind and share of images decoded, the mean of its steady steps.\n")
    for folder in sorted(path.parent for sweep in args.sweeps for path in sweep.glob("runs/*/steps.json")):
        measured_steps = json.loads((folder / "steps.json").read_text())
        summary = json.loads((folder / "summary.json").read_text())
        modelled, per_epoch, total = modelled_steps(load_config(folder / "config.json"), costs, args.data)
        measured, model, by_kind = Counter(), Counter(), defaultdict(list)
        for step, seconds in measured_steps:
            kind, share, modelled_seconds = modelled[step]
            measured[step // per_epoch] += seconds
            model[step // per_epoch] += modelled_seconds
            if step % per_epoch >= WARMUP_STEPS:
                by_kind[kind, round(share, 3)].append((seconds, modelled_seconds))
        errors = [model[epoch] / measured[epoch] - 1 for epoch in measured]
        print(f"## {folder.parent.parent.name}/{folder.name}: measured {summary['train_seconds']:.1f} s, "
              f"modelled {total.seconds:.1f} s "
              f"({100 * (total.seconds / summary['train_seconds'] - 1):+.1f}%); epochs off by "
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


if __name__ == "__main__":
    main()
