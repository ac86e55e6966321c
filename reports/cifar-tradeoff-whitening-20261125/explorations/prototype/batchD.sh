#!/bin/bash
W=<runs>/runwt.sh
T="methods.tta={}"
while pgrep -f batchC.sh >/dev/null; do sleep 5; done
for s in 0 1; do
FASTCORE_WHITEN=frozen $W m05-whfz-s$s 0 cifar_mild schedule.scale_schedule_ratio=0.5 seed=$s "$T"
done
FASTCORE_WHITEN=frozen $W m10-whfz-lr.8-s0 0 cifar_mild schedule.epochs=10 optimizer.lr=0.8 seed=0 "$T"
FASTCORE_WHITEN=frozen $W m10-whfz-ls.15-s0 0 cifar_mild schedule.epochs=10 methods.label_smoothing=0.15 seed=0 "$T"
