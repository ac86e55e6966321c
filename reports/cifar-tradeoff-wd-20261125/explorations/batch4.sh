#!/bin/bash
while pgrep -f batch3.sh >/dev/null; do sleep 5; done
R=./run.sh
E=schedule.epochs=10
$R m10-wd1e-3-s1 cifar_mild $E optimizer.weight_decay=1e-3 seed=1
$R m10-lr.6wd2e-3-s0 cifar_mild $E optimizer.lr=0.6 optimizer.weight_decay=2e-3
$R m10-lr.6wd2e-3-s1 cifar_mild $E optimizer.lr=0.6 optimizer.weight_decay=2e-3 seed=1
$R b15-wd1e-3-s0 cifar_baseline optimizer.weight_decay=1e-3
$R b15-wd1e-3-s1 cifar_baseline optimizer.weight_decay=1e-3 seed=1
