"""Training methods: small classes that attach to the trainer's events, and their pure functions.

    >>> methods = [MixUp(alpha=0.2), EMA(half_life_steps=500)]
"""

from training.methods.base import Event, Method, TrainState
from training.methods.cutmix import CutMix, cutmix_batch
from training.methods.ema import EMA
from training.methods.layer_freezing import LayerFreezing, freeze_layers
from training.methods.mixup import MixUp, mixup_batch
from training.methods.sam import SAM
from training.methods.seq_length_warmup import SequenceLengthWarmup, shorten_batch
from training.methods.swa import SWA

__all__ = [
    "CutMix",
    "EMA",
    "Event",
    "LayerFreezing",
    "Method",
    "MixUp",
    "SAM",
    "SWA",
    "SequenceLengthWarmup",
    "TrainState",
    "cutmix_batch",
    "freeze_layers",
    "mixup_batch",
    "shorten_batch",
]
