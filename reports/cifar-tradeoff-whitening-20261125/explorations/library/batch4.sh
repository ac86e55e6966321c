#!/bin/bash
R=<runs>/run.sh
H=schedule.scale_schedule_ratio=0.5
while pgrep -f "batch[123].sh" >/dev/null; do sleep 5; done
for s in 0 1 2; do
$R h-lr.8-ls.15-s$s cifar_mild $H seed=$s optimizer.lr=0.8 methods.label_smoothing=0.15
done
