#!/bin/bash
R=<runs>/run.sh
H=schedule.scale_schedule_ratio=0.5
while pgrep -f batch1.sh >/dev/null; do sleep 5; done
$R h-nowh-s0 cifar_mild $H seed=0 methods.patch_whitening=None
