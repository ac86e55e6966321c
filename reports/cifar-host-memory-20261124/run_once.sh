#!/bin/sh
# One cifar_mild run in a fresh temporary folder, to be timed whole from outside; appends a line
# {"train_seconds": ..., "top1": ...} to RESULTS. Run from the repository root.
#
#   usage: run_once.sh RESULTS [python -m fastcore_ops.training.train options ...]
#   e.g.   run_once.sh keep.txt --data ../shared/datasets/cifar10-jpeg --subset 500
#
# PYTHON picks the interpreter (default: python). OMP_WAIT_POLICY=PASSIVE as when it was measured.
set -eu
[ $# -ge 1 ] || { echo "usage: run_once.sh RESULTS [fastcore_ops.training.train options ...]" >&2; exit 2; }
results=$1; shift
python=${PYTHON:-python}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
if ! OMP_WAIT_POLICY=PASSIVE "$python" -m fastcore_ops.training.train --recipe cifar_mild --out "$out/run" --no-progress "$@" \
        > "$out/log" 2>&1; then
    cat "$out/log" >&2
    exit 1
fi
"$python" -c 'import json, sys; s = json.load(open(sys.argv[1])); print(json.dumps({"train_seconds": s["train_seconds"], "top1": s["metrics"]["top1"]}))' \
    "$out/run/summary.json" >> "$results"
