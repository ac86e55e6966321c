#!/bin/bash
R=./run.sh
E=schedule.epochs=10
$R m10-ref-s0 cifar_mild $E
$R m10-lr0.6-s0 cifar_mild $E optimizer.lr=0.6
$R m10-lr0.8-s0 cifar_mild $E optimizer.lr=0.8
$R m10-ls0.15-s0 cifar_mild $E methods.label_smoothing=0.15
$R m10-wd1e-3-s0 cifar_mild $E optimizer.weight_decay=1e-3
$R m10-nobp-s0 cifar_mild $E "model.surgeries=['channels_last']"
$R m10-pr20-s0 cifar_mild $E data.progressive_resize.initial_scale=0.625
$R m10-wu0.5-s0 cifar_mild $E schedule.warmup_epochs=0.5
$R m10-se32-s0 cifar_mild $E "model.surgeries=['blurpool', ('squeeze_excite', {'min_channels': 32, 'latent_channels': 0.25}), 'channels_last']"
$R m10-se16-s0 cifar_mild $E "model.surgeries=['blurpool', ('squeeze_excite', {'min_channels': 16, 'latent_channels': 0.25}), 'channels_last']"
