#!/bin/bash
while pgrep -f batch2.sh >/dev/null; do sleep 5; done
R=./run.sh
E=schedule.epochs=10
$R m10-bs64-s0 cifar_mild $E data.batch_size=64
$R m10-prtail-s0 cifar_mild $E data.progressive_resize.finetune_fraction=0.1 data.progressive_resize.delay_fraction=0.5
$R m10-lr.6wd1e-3ls.2-s0 cifar_mild $E optimizer.lr=0.6 optimizer.weight_decay=1e-3 methods.label_smoothing=0.2
