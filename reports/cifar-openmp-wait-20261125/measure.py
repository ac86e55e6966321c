"""ResNet-20 training steps alone under three OpenMP wait policies: does the policy move the CIFAR ratio?

    python reports/cifar-openmp-wait-20261125/measure.py > reports/cifar-openmp-wait-20261125/step_times.csv

libgomp (PyTorch's OpenMP on Linux) reads its wait policy when it loads, so each policy runs the
step timer of ``reports/cifar-step-compute-20261125/measure.py`` in a process of its own: PyTorch's
default (threads spin for a while before sleeping), ``OMP_WAIT_POLICY=PASSIVE`` (they sleep at once,
as the sweeps before 2026-11-25 15:50 ran), and ``OMP_WAIT_POLICY=ACTIVE`` (they never sleep). The
policies take turns, ``ROUNDS`` times, so a drift in the host's speed reaches them all alike.
"""

import csv
import os
import subprocess
import sys
from pathlib import Path

STEP_TIMER = Path(__file__).resolve().parents[1] / "cifar-step-compute-20261125" / "measure.py"
POLICIES = {"default": None, "PASSIVE": "PASSIVE", "ACTIVE": "ACTIVE"}
ROUNDS = 3


def step_times(policy: str | None) -> list[dict[str, str]]:
    environment = {name: value for name, value in os.environ.items() if name not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    if policy is not None:
        environment["OMP_WAIT_POLICY"] = policy
    finished = subprocess.run([sys.executable, str(STEP_TIMER)], env=environment, capture_output=True, text=True,
                              check=True)
    return list(csv.DictReader(finished.stdout.splitlines()))


writer = csv.writer(sys.stdout)
writer.writerow(["round", "OpenMP wait policy", "model", "image size (px)", "ms per step"])
for round_number in range(ROUNDS):
    for name, policy in POLICIES.items():
        for row in step_times(policy):
            writer.writerow([round_number, name, row["model"], row["image size (px)"], row["ms per step"]])
        sys.stdout.flush()
