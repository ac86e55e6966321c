#!/bin/bash
R=./run.sh
E=schedule.epochs=10
$R m10-lr.6wd1e-3-s0 cifar_mild $E optimizer.lr=0.6 optimizer.weight_decay=1e-3
$R m10-lr.6wd1e-3ls.15-s0 cifar_mild $E optimizer.lr=0.6 optimizer.weight_decay=1e-3 methods.label_smoothing=0.15
$R m10-ref-s1 cifar_mild $E seed=1
$R m10-lr.6wd1e-3-s1 cifar_mild $E optimizer.lr=0.6 optimizer.weight_decay=1e-3 seed=1
$R m10-lr.6wd1e-3ls.15-s1 cifar_mild $E optimizer.lr=0.6 optimizer.weight_decay=1e-3 methods.label_smoothing=0.15 seed=1
$R m10-lr.6-s1 cifar_mild $E optimizer.lr=0.6 seed=1
