#!/bin/bash
W=<runs>/runwt.sh
E=schedule.epochs=10
T="methods.tta={}"
while pgrep -f batchA.sh >/dev/null; do sleep 5; done
for s in 0 1; do
$W m10-tr2-s$s 2 cifar_mild $E seed=$s "$T"
$W m10-tr4-s$s 4 cifar_mild $E seed=$s "$T"
done
$W b15-tr2-s0 2 cifar_baseline seed=0 "$T"
