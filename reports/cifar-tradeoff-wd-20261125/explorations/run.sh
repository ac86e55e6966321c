#!/bin/bash
# usage: run.sh NAME RECIPE [key=value ...]   -> one line in log.txt
name=$1; recipe=$2; shift 2
sets=(); for s in "$@"; do sets+=(--set "$s"); done
cd <repository> && line=$(OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m training.train --recipe $recipe --data ../shared/datasets/cifar10-jpeg --subset 500 --out <runs>/$name --no-progress "${sets[@]}" 2>&1 | tail -1)
echo "$name | $* | $line" >> runs.log
