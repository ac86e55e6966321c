"""ResNet-50 on ImageNet, MosaicML's "Medium" recipe: the mid-budget regime (60-240 epochs).

Source: "Mosaic ResNet Deep Dive" (MosaicML, 2022), Table 1, column "MosaicML Medium", and the
"Medium Recipe" section: everything in Mild (BCE loss, BlurPool, EMA, FixRes, progressive
resizing, channels last) with label smoothing 0.1, plus MixUp (alpha 0.2) and sharpness-aware
minimization (rho 0.5) on every 10th step, since SAM's second pass roughly halves throughput.
Optimizer as the NVIDIA Hparams Baseline: SGD, LR 2.048, momentum 0.875, weight decay 5e-4
(decoupled), 8 warmup epochs, cosine. Accuracy 78.1-79.5% top-1.

Not represented: the FFCV data loader (a data-pipeline choice; ``data.backend`` picks ours).

Global batch semantics: as ``resnet50_baseline``: LR 2.048 is for the global batch of 2048
(8 processes of 256, ``optimizer.reference_batch``) and is scaled linearly to the run's.
"""

from fastcore_ops.training.methods import LabelSmoothingOptions, MixUpOptions, SAMOptions
from fastcore_ops.training.recipes import Derived

# Mild's optimizer (the baseline's), FixRes 176 -> 224 px, BlurPool, channels last, progressive resizing from
# half size, BCE and EMA over 1000 steps.
RECIPE = Derived("resnet50_mild", {
    # Medium covers 60-240 epochs; 90 is the length at which the methods were selected
    # (the text's "A Word on Hyperparameter Optimization") and gives 79.1% (Table 8).
    "schedule.epochs": 90.0,
    "methods.label_smoothing": LabelSmoothingOptions(0.1),
    "methods.mixup": MixUpOptions(alpha=0.2),
    "methods.sam": SAMOptions(rho=0.5, interval=10),
})
