"""Collect the crop/LR search runs into one CSV: name, recipe, what was overridden, top-1, training time.

    python reports/cifar-crop-search-20261124/collect.py --runs RUNS --log RUNS/log.txt --out OUT

RUNS holds one training run folder per name (its config.json and summary.json); the log has one
line per run, "NAME | settings | last line of the run's output". Runs whose last line has no
top-1 (refused settings) are left out. Writes OUT/search.csv; with --copy-runs also each run's
config.json and summary.json under OUT/runs/NAME/.
"""

import argparse
import csv
import json
import shutil
from pathlib import Path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, required=True, help="folder of the run folders")
    parser.add_argument("--log", type=Path, help="the runs' log (default: RUNS/log.txt)")
    parser.add_argument("--out", type=Path, required=True, help="folder for search.csv")
    parser.add_argument("--copy-runs", action="store_true", help="also copy each run's config and summary")
    args = parser.parse_args(argv)
    log = args.log or args.runs / "log.txt"
    overrides = {}
    for line in log.read_text().splitlines():
        name, sets, result = (part.strip() for part in line.split(" | ", 2))
        if "top-1" in result:
            overrides[name] = sets.replace("--set ", "")
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "search.csv", "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["run", "recipe", "overrides", "epochs", "top1 (%)", "train_seconds", "steps"])
        for name, sets in overrides.items():
            summary = json.loads((args.runs / name / "summary.json").read_text())
            config = json.loads((args.runs / name / "config.json").read_text())
            writer.writerow([name, config["name"], sets, config["schedule"]["epochs"],
                             round(100 * summary["metrics"]["top1"], 2), round(summary["train_seconds"], 1),
                             summary["steps"]])
            if args.copy_runs:
                (args.out / "runs" / name).mkdir(parents=True, exist_ok=True)
                for file_name in ("config.json", "summary.json"):
                    shutil.copy(args.runs / name / file_name, args.out / "runs" / name / file_name)


if __name__ == "__main__":
    main()
