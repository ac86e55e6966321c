#!/bin/bash
R=<runs>/run.sh
S=schedule.scale_schedule_ratio=0.625
while pgrep -f "sweep.sh" >/dev/null; do sleep 5; done
for s in 2 1 0; do
$R f-ls.2-s$s cifar_mild $S seed=$s methods.label_smoothing=0.2
$R f-lr.8-s$s cifar_mild $S seed=$s optimizer.lr=0.8
done
