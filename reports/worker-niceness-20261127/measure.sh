#!/bin/bash
# Full-data cifar_mild at --budget 0.25 with the decoding workers at niceness 0, 5 and 10,
# taking turns (each round starts one further along the list), ROUNDS rounds (default 3); one CSV
# row per run. Further arguments go to every training run. From the repository root:
#   bash reports/worker-niceness-20261127/measure.sh ../shared/datasets/cifar10-jpeg RUNS_FOLDER > runs.csv
set -eu
data=$1; runs=$2; rounds=${3:-3}; shift $(($# < 3 ? $# : 3))
here=$(dirname "$0")
levels=(0 5 10)
mkdir -p "$runs"
echo "round,niceness,train_seconds,data,forward,backward,optimizer,methods,top1"
for round in $(seq 0 $((rounds - 1))); do
  for turn in 0 1 2; do
    niceness=${levels[$(((round + turn) % 3))]}
    out=$runs/n$niceness-r$round
    PYTHONPATH=. python "$here/measure.py" "$niceness" --recipe cifar_mild --data "$data" --budget 0.25 \
      --eval-every 0 --no-progress --out "$out" "$@" > "$out.log" 2>&1
    python -c "
import json
s = json.load(open('$out/summary.json')); p = s['phase_seconds']
print(','.join(str(v) for v in [$round, $niceness, round(s['train_seconds'], 1),
      *(round(p[k], 1) for k in ('data', 'forward', 'backward', 'optimizer', 'methods')), s['metrics']['top1']]))"
  done
done
