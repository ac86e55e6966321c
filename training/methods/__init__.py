"""Training methods: small classes that attach to the trainer's events, and their pure functions.

    >>> methods = [MixUp(alpha=0.2), EMA(half_life_steps=500)]
"""

from training.methods.augmix import AugMix, AugMixOptions
from training.methods.base import Event, Method, SeededMethod, TrainState
from training.methods.cutmix import CutMix, cutmix_batch
from training.methods.cutout import Cutout, CutoutOptions, cutout_batch
from training.methods.ema import EMA
from training.methods.layer_freezing import LayerFreezing, freeze_layers
from training.methods.mixup import MixUp, mixup_batch
from training.methods.patch_whitening import PatchWhiteningOptions, whiten_stem_
from training.methods.sam import SAM
from training.methods.selective_backprop import SelectiveBackprop, SelectiveBackpropOptions
from training.methods.seq_length_warmup import SequenceLengthWarmup, shorten_batch
from training.methods.swa import SWA
from training.methods.tta import TTAOptions, tta_probabilities

__all__ = [
    "AugMix",
    "AugMixOptions",
    "CutMix",
    "Cutout",
    "CutoutOptions",
    "EMA",
    "Event",
    "LayerFreezing",
    "Method",
    "MixUp",
    "PatchWhiteningOptions",
    "SAM",
    "SWA",
    "SelectiveBackprop",
    "SelectiveBackpropOptions",
    "SeededMethod",
    "SequenceLengthWarmup",
    "TTAOptions",
    "TrainState",
    "cutmix_batch",
    "cutout_batch",
    "freeze_layers",
    "mixup_batch",
    "shorten_batch",
    "tta_probabilities",
    "whiten_stem_",
]
