#!/bin/bash
W=<runs>/runwt.sh
E=schedule.epochs=10
T="methods.tta={}"
for s in 0 1; do
FASTCORE_WHITEN=train $W m10-whtr-s$s 0 cifar_mild $E seed=$s "$T"
FASTCORE_WHITEN=frozen $W m10-whfz-s$s 0 cifar_mild $E seed=$s "$T"
done
