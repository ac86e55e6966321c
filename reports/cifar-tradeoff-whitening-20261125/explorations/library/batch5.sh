#!/bin/bash
R=<runs>/run.sh
H=schedule.scale_schedule_ratio=0.5
while pgrep -f "batch[1234].sh" >/dev/null; do sleep 5; done
for s in 1 2; do
$R h-ls.2-s$s cifar_mild $H seed=$s methods.label_smoothing=0.2
done
