#!/bin/bash
while pgrep -f "training.ablate" >/dev/null; do sleep 5; done
R=/work/sweeps/s8/run.sh
for s in 0 1; do
  $R m8-ref-s$s cifar_mild schedule.epochs=8 seed=$s
  $R m8-freeze-s$s cifar_mild schedule.epochs=8 seed=$s methods.freeze_level=0.5 methods.freeze_start=0.5
  $R m8-noema-s$s cifar_mild schedule.epochs=8 seed=$s methods.ema_half_life_steps=0
  $R m8-mixup-s$s cifar_mild schedule.epochs=8 seed=$s methods.mixup_alpha=0.2
  $R m8-nodecay-s$s cifar_mild schedule.epochs=8 seed=$s optimizer.no_decay_norm_and_bias=True
done
