"""ResNet-20 on CIFAR-10, the "Mild" idea at CIFAR scale: the baseline's accuracy in half its time.

Follows ``resnet50_mild`` (MosaicML's Mild column of Table 1 in "Mosaic ResNet Deep Dive"):
the baseline plus BCE loss (classifier bias -log C), label smoothing 0.08, BlurPool, EMA,
progressive resizing and channels last, and no MixUp or SAM, which pay off only in longer
runs. Trains 8 epochs against the baseline's 15, and the early low-resolution epochs are
cheaper still. The optimizer is the baseline's (keep the two in step when it is retuned).
"""

from dataclasses import replace

from training.config import MethodsConfig, ModelConfig, ScheduleConfig, TrainConfig
from training.recipes.cifar_baseline import RECIPE as BASELINE

RECIPE = TrainConfig(
    name="cifar_mild",
    model=ModelConfig(name="cifar_resnet20", blurpool=True, channels_last=True),
    optimizer=replace(BASELINE.optimizer),  # the tuned baseline's
    schedule=ScheduleConfig(epochs=8.0, warmup_epochs=1.0, final_lr_fraction=0.0),
    data=replace(
        BASELINE.data,  # batch size, 32 px crops, flips
        progressive_resize=True,
        resize_initial_scale=0.5,  # 16 px first, growing in 4 px steps to 32 px
        resize_delay_fraction=0.4,
        resize_finetune_fraction=0.2,
        resize_size_increment=4,
    ),
    methods=MethodsConfig(
        loss="bce",
        label_smoothing=0.08,
        # About a third of an epoch (391 steps at batch 128): the same small fraction of the run
        # as the ResNet-50 recipes' 1000 steps (Composer's default) is of Mild's 36 epochs.
        ema_half_life_steps=130,
    ),
    precision="fp32",  # as cifar_baseline: bf16 autocast is slower on this CPU
)
