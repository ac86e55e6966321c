#!/bin/bash
R=<runs>/run.sh
E=schedule.epochs=10
T="methods.tta={}"
for s in 0 1; do
$R m10-ref-s$s cifar_mild $E seed=$s "$T"
$R m10-gbn32-s$s cifar_mild $E seed=$s "$T" "model.surgeries=['blurpool', ('ghost_batchnorm', {'ghost_batch_size': 32}), 'channels_last']"
$R m10-nobd-s$s cifar_mild $E seed=$s "$T" optimizer.no_decay_norm_and_bias=True
$R m10-mom.95-s$s cifar_mild $E seed=$s "$T" optimizer.momentum=0.95
done
