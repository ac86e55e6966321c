#!/bin/bash
R=<runs>/run.sh
H=schedule.scale_schedule_ratio=0.5
for s in 0 1; do
$R h-ref-s$s cifar_mild $H seed=$s
$R h-lr.8-s$s cifar_mild $H seed=$s optimizer.lr=0.8
$R h-ls.15-s$s cifar_mild $H seed=$s methods.label_smoothing=0.15
done
$R h-ref-s2 cifar_mild $H seed=2
$R h-wu.5-s0 cifar_mild $H seed=0 schedule.warmup_epochs=0.5
