#!/bin/bash
# usage: runwt.sh NAME TRANSLATE RECIPE [key=value ...]  (worktree code)
name=$1; tr=$2; recipe=$3; shift 3
sets=(); for s in "$@"; do sets+=(--set "$s"); done
line=$(cd <prototype worktree> && FASTCORE_TRANSLATE=$tr OMP_WAIT_POLICY=PASSIVE <repository>/.venv/bin/python -m training.train --recipe $recipe --data <repository>/../shared/datasets/cifar10-jpeg --subset 500 --out <runs>/runs/$name --no-progress "${sets[@]}" 2>&1 | tail -1)
tta=$(python3 -c "import json;m=json.load(open('<runs>/runs/$name/summary.json'))['metrics'];print(m.get('top1_tta',''))" 2>/dev/null)
echo "$name | tr$tr $* | $line | tta $tta" >> <runs>/runs.log
