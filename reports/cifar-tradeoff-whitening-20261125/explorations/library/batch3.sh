#!/bin/bash
R=<runs>/run.sh
H=schedule.scale_schedule_ratio=0.5
while pgrep -f "batch[12].sh" >/dev/null; do sleep 5; done
$R s625-ref-s0 cifar_mild schedule.scale_schedule_ratio=0.625 seed=0
$R h-nobd-s0 cifar_mild $H seed=0 optimizer.no_decay_norm_and_bias=True
$R h-pr.3-s0 cifar_mild $H seed=0 data.progressive_resize.delay_fraction=0.3
$R h-ls.2-s0 cifar_mild $H seed=0 methods.label_smoothing=0.2
