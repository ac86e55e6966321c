"""ResNet-20 training steps alone under three OpenMP wait policies: does the policy move the CIFAR ratio?

    PYTHONPATH=. python reports/cifar-openmp-wait-20261125/measure.py > reports/cifar-openmp-wait-20261125/step_times.csv

libgomp (PyTorch's OpenMP on Linux) reads its wait policy when it loads, so each policy runs the
step timer of ``reports/cifar-step-compute-20261125/measure.py`` in a process of its own: PyTorch's
default (threads spin for a while before sleeping), ``OMP_WAIT_POLICY=PASSIVE`` (they sleep at once,
as the sweeps before 2026-11-25 15:50 ran), and ``OMP_WAIT_POLICY=ACTIVE`` (they never sleep). The
policies take turns, --rounds times, so a drift in the host's speed reaches them all alike.
"""

import argparse
import csv
import os
import subprocess
import sys
from pathlib import Path

STEP_TIMER = Path(__file__).resolve().parents[1] / "cifar-step-compute-20261125" / "measure.py"
POLICIES = {"default": None, "PASSIVE": "PASSIVE", "ACTIVE": "ACTIVE"}


def step_times(policy: str | None, timer_arguments: list[str]) -> list[dict[str, str]]:
    """The step timer's rows, run in a fresh process under this wait policy (None: libgomp's default)."""
    environment = {name: value for name, value in os.environ.items() if name not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    if policy is not None:
        environment["OMP_WAIT_POLICY"] = policy
    finished = subprocess.run([sys.executable, str(STEP_TIMER), *timer_arguments], env=environment,
                              capture_output=True, text=True)
    if finished.returncode != 0:
        sys.exit(f"the step timer failed under the {policy or 'default'} policy:\n{finished.stderr}")
    return list(csv.DictReader(finished.stdout.splitlines()))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="times each policy runs, in turn")
    parser.add_argument("--policies", default=",".join(POLICIES), help="comma-separated, of: " + ", ".join(POLICIES))
    parser.add_argument("--batch-size", type=int, default=128, help="the step timer's batch size")
    parser.add_argument("--warmup", type=int, default=4, help="the step timer's untimed steps")
    parser.add_argument("--steps", type=int, default=12, help="the step timer's timed steps")
    args = parser.parse_args(argv)
    policies = args.policies.split(",")
    unknown = sorted(set(policies) - set(POLICIES))
    if unknown:
        parser.error(f"unknown policies: {', '.join(unknown)}")
    timer_arguments = ["--batch-size", str(args.batch_size), "--warmup", str(args.warmup), "--steps", str(args.steps)]
    writer = csv.writer(sys.stdout)
    writer.writerow(["round", "OpenMP wait policy", "model", "image size (px)", "ms per step"])
    for round_number in range(args.rounds):
        for name in policies:
            for row in step_times(POLICIES[name], timer_arguments):
                writer.writerow([round_number, name, row["model"], row["image size (px)"], row["ms per step"]])
            sys.stdout.flush()


if __name__ == "__main__":
    main()
