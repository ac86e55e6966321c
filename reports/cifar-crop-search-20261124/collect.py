"""Usage: collect.py OUT RUNS. Collect the crop/LR search runs into one CSV (name, what was overridden, top-1, training time)."""
import csv, json, sys
from pathlib import Path

runs = Path(sys.argv[2])
overrides = {}
for line in (runs / "log.txt").read_text().splitlines():
    name, sets, result = (part.strip() for part in line.split(" | ", 2))
    if "top-1" in result:
        overrides[name] = sets.replace("--set ", "")
out = Path(sys.argv[1])
with open(out / "search.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["run", "recipe", "overrides", "epochs", "top1 (%)", "train_seconds", "steps"])
    for name, sets in overrides.items():
        s = json.loads((runs / name / "summary.json").read_text())
        c = json.loads((runs / name / "config.json").read_text())
        w.writerow([name, c["name"], sets, c["schedule"]["epochs"], round(100 * s["metrics"]["top1"], 2),
                    round(s["train_seconds"], 1), s["steps"]])
        run_dir = out / "runs" / name
        run_dir.mkdir(parents=True, exist_ok=True)
        for f_name in ("config.json", "summary.json"):
            (run_dir / f_name).write_text((runs / name / f_name).read_text())
