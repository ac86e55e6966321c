"""Training methods, one module each, registered in :mod:`fastcore_ops.training.methods.registry`.

A method's module holds its options (``methods.<name>`` of a run's configuration), its
functional form for any training loop, its event hooks for our trainer and its method card.
They live here, beside the trainer, and not in ``fastcore_ops``: their hooks are written against
this trainer's events and state, and the configuration names them. What does not depend on a
trainer is in the library already (surgeries, kernels, the loader's augmentations: registered
in :mod:`fastcore_ops.training.methods.library`), and each module's functional form imports nothing of the
trainer, so ``from fastcore_ops.training.methods import mixup_batch`` serves any loop.

    >>> from fastcore_ops.training.methods import MixUpOptions, mixup_batch
    >>> MixUpOptions(alpha=0.2)
    MixUpOptions(alpha=0.2)
"""

from fastcore_ops.training.methods.augmix import AugMix, AugMixOptions
from fastcore_ops.training.methods.base import Event, Method, SeededMethod, TrainState
from fastcore_ops.training.methods.bce_loss import BCELossOptions
from fastcore_ops.training.methods.bias_lr_scale import BiasLRScaleOptions, bias_lr_groups
from fastcore_ops.training.methods.cutmix import CutMix, CutMixOptions, cutmix_batch
from fastcore_ops.training.methods.cutout import Cutout, CutoutOptions, cutout_batch
from fastcore_ops.training.methods.dirac_init import DiracInitOptions, dirac_convolutions_
from fastcore_ops.training.methods.ema import EMA, EMAOptions
from fastcore_ops.training.methods.label_smoothing import LabelSmoothingOptions, smoothed_targets
from fastcore_ops.training.methods.layer_freezing import (LayerFreezing, LayerFreezingOptions, freeze_layers,
                                                          freeze_parameters)
from fastcore_ops.training.methods.library import surgery_request
from fastcore_ops.training.methods.lookahead import Lookahead, LookaheadOptions, lookahead_pull_
from fastcore_ops.training.methods.low_precision_norm import (LowPrecisionNorm, LowPrecisionNormOptions,
                                                              low_precision_norms_)
from fastcore_ops.training.methods.mixup import MixUp, MixUpOptions, mixup_batch
from fastcore_ops.training.methods.muon import MuonOptions, MuonSGD, muon_step_, orthogonalized
from fastcore_ops.training.methods.patch_whitening import PatchWhiteningOptions, whiten_stem_
from fastcore_ops.training.methods.sam import SAM, SAMOptions, ascend_, descend_
from fastcore_ops.training.methods.selective_backprop import SelectiveBackprop, SelectiveBackpropOptions
from fastcore_ops.training.methods.seq_length_warmup import SeqLengthWarmupOptions, SequenceLengthWarmup, shorten_batch
from fastcore_ops.training.methods.stem_freezing import StemFreezing, StemFreezingOptions
from fastcore_ops.training.methods.swa import SWA, SWAOptions
from fastcore_ops.training.methods.tta import TTAOptions, tta_probabilities

__all__ = [
    "AugMix", "AugMixOptions", "BCELossOptions", "BiasLRScaleOptions", "CutMix", "CutMixOptions", "Cutout",
    "CutoutOptions", "DiracInitOptions", "EMA", "EMAOptions", "Event", "LabelSmoothingOptions", "LayerFreezing",
    "LayerFreezingOptions", "Lookahead", "LookaheadOptions", "LowPrecisionNorm", "LowPrecisionNormOptions", "Method",
    "MixUp", "MixUpOptions", "MuonOptions", "MuonSGD", "PatchWhiteningOptions", "SAM", "SAMOptions", "SWA",
    "SWAOptions", "SelectiveBackprop", "SelectiveBackpropOptions", "SeededMethod", "SeqLengthWarmupOptions",
    "SequenceLengthWarmup", "StemFreezing", "StemFreezingOptions", "TTAOptions", "TrainState", "ascend_",
    "bias_lr_groups", "cutmix_batch", "cutout_batch", "descend_", "dirac_convolutions_", "freeze_layers",
    "freeze_parameters", "lookahead_pull_", "low_precision_norms_", "mixup_batch", "muon_step_", "orthogonalized",
    "shorten_batch", "smoothed_targets", "surgery_request", "tta_probabilities", "whiten_stem_",
]
