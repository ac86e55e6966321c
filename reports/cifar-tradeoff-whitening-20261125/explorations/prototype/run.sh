#!/bin/bash
# usage: run.sh NAME RECIPE [key=value ...]   -> one line in runs.log
name=$1; recipe=$2; shift 2
sets=(); for s in "$@"; do sets+=(--set "$s"); done
line=$(cd <repository> && OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m training.train --recipe $recipe --data ../shared/datasets/cifar10-jpeg --subset 500 --out <runs>/runs/$name --no-progress "${sets[@]}" 2>&1 | tail -1)
tta=$(python3 -c "import json;m=json.load(open('<runs>/runs/$name/summary.json'))['metrics'];print(m.get('top1_tta',''))" 2>/dev/null)
echo "$name | $* | $line | tta $tta" >> <runs>/runs.log
