#!/bin/bash
R=<runs>/run.sh
S=schedule.scale_schedule_ratio=0.625
for s in 0 2; do
$R f-b256-s$s cifar_mild $S seed=$s data.batch_size=256
done
