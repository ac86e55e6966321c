#!/bin/sh
# One cifar_mild run; appends its training seconds and top-1 to /work/sweeps/hm_$1.txt
tag=$1; shift
out=/tmp/hm_$tag
rm -rf $out
cd /work/main && OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m training.train --recipe cifar_mild --data ../shared/datasets/cifar10-jpeg --subset 500 --out $out --no-progress "$@" > $out.log 2>&1
.venv/bin/python -c "import json,sys; s=json.load(open('$out/summary.json')); print({k: s[k] for k in s if k in ('train_seconds','top1','compile_seconds','wall_seconds')})" >> /work/sweeps/hm_$tag.txt
