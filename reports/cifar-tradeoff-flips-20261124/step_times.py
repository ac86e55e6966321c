"""Per-step times of every run in results.csv, and Mild's speedup with each recipe's fastest step time.

Usage: python step_times.py   (reads results.csv next to it; writes nothing)
"""
import csv
import statistics
from collections import defaultdict
from pathlib import Path

runs = defaultdict(list)
with open(Path(__file__).with_name("results.csv"), newline="") as file:
    for row in csv.DictReader(file):
        runs[row["recipe"], float(row["budget"])].append(
            (100 * float(row["metrics.top1"]), float(row["train_seconds"]), int(row["steps"])))

for (recipe, budget), seeds in sorted(runs.items()):
    print(f"{recipe} x{budget}: top-1 {statistics.mean(t for t, _, _ in seeds):.2f}%, "
          f"ms per step {[round(1000 * s / n) for _, s, n in seeds]}")


def fastest_step(recipe):
    return min(s / n for seeds in (v for (r, _), v in runs.items() if r == recipe) for _, s, n in seeds)


def mean(recipe, budget, index):
    return statistics.mean(seed[index] for seed in runs[recipe, budget])


# Steps Mild needs to reach the baseline's x1 top-1, interpolated linearly between its x0.5 and x1.
target = mean("cifar_baseline", 1.0, 0)
low, high = (mean("cifar_mild", b, 0) for b in (0.5, 1.0))
low_steps, high_steps = (mean("cifar_mild", b, 2) for b in (0.5, 1.0))
mild_steps = low_steps + (target - low) / (high - low) * (high_steps - low_steps)
base_steps = mean("cifar_baseline", 1.0, 2)
print(f"cifar_mild reaches {target:.2f}% after {mild_steps:.0f} steps; the baseline takes {base_steps:.0f}")
print(f"fastest step: baseline {1000 * fastest_step('cifar_baseline'):.0f} ms, mild {1000 * fastest_step('cifar_mild'):.0f} ms")
print(f"speedup at the fastest step times: "
      f"{base_steps * fastest_step('cifar_baseline') / (mild_steps * fastest_step('cifar_mild')):.2f}x")
