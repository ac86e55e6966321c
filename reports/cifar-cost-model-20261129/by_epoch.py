"""Each epoch of runs that kept their step times (``step_times.py``), measured beside what the cost pass models.

    PYTHONPATH=. python reports/cifar-cost-model-20261129/by_epoch.py COSTS_JSON SWEEP... \
        --data ../shared/datasets/cifar10-jpeg > by-epoch.md

For every run under ``SWEEP/runs/`` with a ``steps.json``: its plan (the cost pass's own,
``training.tradeoff.step_kinds.plan_run``), each step's modelled seconds (its kind's time with
images kept, plus the share of its images decoded afresh times the extra a decoded step costs),
and per epoch the measured and modelled sums. Start-up costs (a new image size's, an epoch's, the
setup) are left out of both columns' epochs and shown once per run. Prints markdown.
"""

import argparse
import json
from collections import Counter
from pathlib import Path

import torch

from training.assemble import build_trainer
from training.config import load_config, setup_hash
from training.tradeoff.cost_pass import read_costs
from training.tradeoff.step_kinds import decode_share, kind_function, plan_run


def modelled_steps(config, costs, data: Path) -> tuple[dict[int, float], int, object]:
    """Each step's modelled seconds, the steps per epoch, and the run's modelled time."""
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
        seconds[step] = cost.kept_seconds + share * (cost.decoded_seconds - cost.kept_seconds)
    return seconds, plan.steps_per_epoch, costs.modelled(plan)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("costs", type=Path)
    parser.add_argument("sweeps", type=Path, nargs="+")
    parser.add_argument("--data", type=Path, required=True)
    args = parser.parse_args(argv)
    costs = read_costs(args.costs)
    print(f"Step times: `{args.costs}` ({costs.machine}). Per epoch, the steps' measured and modelled seconds "
          "(start-up costs apart).\n")
    for folder in sorted(path.parent for sweep in args.sweeps for path in sweep.glob("runs/*/steps.json")):
        measured_steps = json.loads((folder / "steps.json").read_text())
        summary = json.loads((folder / "summary.json").read_text())
        modelled, per_epoch, total = modelled_steps(load_config(folder / "config.json"), costs, args.data)
        measured, model = Counter(), Counter()
        for step, seconds in measured_steps:
            measured[step // per_epoch] += seconds
            model[step // per_epoch] += modelled[step]
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
        print()


if __name__ == "__main__":
    main()
