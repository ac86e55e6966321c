"""From a TrainConfig and a data folder to a ready Trainer: data, model, surgeries, optimizer, methods.

The one place that reads every section of the configuration; ``training.train`` (the command)
and ``training.tradeoff`` call it.

    >>> from training.recipes import get_recipe
    >>> trainer = build_trainer(get_recipe("cifar_mild"), data=Path("../shared/datasets/cifar10-jpeg"),
    ...                         out=Path("runs/mild"), device=torch.device("cpu"), subset=500)  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

from fastcore_ops import apply_surgery
from fastcore_ops.data import ColOutOptions, ProgressiveResize, RandAugmentOptions, build_loader
from fastcore_ops.data.order import samples_per_rank
from fastcore_ops.data.sources import find_samples
from fastcore_ops.kernels import init_bce_bias_
from training.checkpoint import CheckpointPolicy
from training.config import TrainConfig
from training.losses import classification_loss
from training.methods import EMA, SAM, SWA, CutMix, LayerFreezing, Method, MixUp
from training.models import build_model
from training.optim import build_optimizer
from training.trainer import Trainer

log = logging.getLogger("training")

TRAIN_FOLDERS = ("train",)
EVAL_FOLDERS = ("val", "test")


def scaled(config: TrainConfig) -> TrainConfig:
    """``config`` with the scale schedule applied: epochs and warmup stretched by the ratio, ratio 1.

    Every other schedule (progressive resizing, layer freezing, SWA, the cosine) is a fraction of
    the run and stretches with it.

        >>> from training.config import override
        >>> scaled(override(TrainConfig(), ["schedule.scale_schedule_ratio=0.5"])).schedule.epochs
        45.0
    """
    ratio = config.schedule.scale_schedule_ratio
    schedule = dataclasses.replace(config.schedule, epochs=config.schedule.epochs * ratio,
                                   warmup_epochs=config.schedule.warmup_epochs * ratio, scale_schedule_ratio=1.0)
    return dataclasses.replace(config, schedule=schedule)


def split_folders(data: Path) -> tuple[Path, Path]:
    """The training and evaluation ImageFolder roots under ``data`` (``train/`` and ``val/`` or ``test/``)."""
    if not data.is_dir():
        raise FileNotFoundError(f"--data {data}: no such folder; pass a folder holding train/ and val/ (or test/)")
    found = [data / name for name in TRAIN_FOLDERS if (data / name).is_dir()]
    evals = [data / name for name in EVAL_FOLDERS if (data / name).is_dir()]
    if not found or not evals:
        raise FileNotFoundError(f"--data {data} must hold a train/ folder and a val/ or test/ folder, each "
                                f"laid out as <class>/<image>; found {sorted(p.name for p in data.iterdir())}")
    return found[0], evals[0]


def effective_lr(config: TrainConfig, world_size: int) -> float:
    """``optimizer.lr`` scaled linearly from ``optimizer.reference_batch`` to the run's global batch.

    The global batch is ``data.batch_size`` on each of ``world_size`` processes (the linear
    scaling rule of Goyal et al., 2017), so a recipe keeps its LR per image at any world size.

        >>> from training.config import override
        >>> config = override(TrainConfig(), ["optimizer.lr=2.048", "optimizer.reference_batch=2048"])
        >>> effective_lr(config, world_size=1), effective_lr(config, world_size=8)  # batch 256 each
        (0.256, 2.048)
    """
    return config.optimizer.lr * config.data.batch_size * world_size / config.optimizer.reference_batch


def lr_scaling_note(config: TrainConfig, world_size: int) -> str:
    """One line saying which LR the run uses and how it follows from the recipe's.

        >>> print(lr_scaling_note(TrainConfig(), world_size=2))
        lr 0.2 = 0.1 x 512 / 256 (linear scaling to the global batch, 2 x 256)
    """
    optimizer, batch = config.optimizer, config.data.batch_size
    return (f"lr {effective_lr(config, world_size):g} = {optimizer.lr:g} x {batch * world_size} / "
            f"{optimizer.reference_batch} (linear scaling to the global batch, {world_size} x {batch})")


def first_per_class(root: Path, per_class: int) -> tuple[list[tuple[str, int]], list[str]]:
    """The first ``per_class`` images of each class (in file order) and the class names."""
    samples, classes = find_samples(root)
    taken = [0] * len(classes)
    subset = []
    for path, label in samples:
        if taken[label] < per_class:
            subset.append((path, label))
            taken[label] += 1
    return subset, classes


def training_samples(train_root: Path, subset: int | None) -> tuple[list[tuple[str, int]], list[str]]:
    """The training samples and class names: the first ``subset`` per class, or all of them."""
    return first_per_class(train_root, subset) if subset else find_samples(train_root)


def check_shard_size(config: TrainConfig, samples: list[tuple[str, int]], world_size: int) -> None:
    """Refuse, before any process starts work, a run whose training ``samples`` leave no full batch per rank.

    Training drops each rank's last incomplete batch, so a rank needs at least ``data.batch_size``
    images; every rank gets the same count (training shards are padded to equal size).

        >>> check_shard_size(TrainConfig(), [("cat.jpg", 0)] * 3, world_size=2)
        Traceback (most recent call last):
        ...
        ValueError: data.batch_size=256 is more than the 2 training images each of 2 process(es) gets (3 in all), ...
    """
    per_rank = samples_per_rank(len(samples), world_size)
    if per_rank < config.data.batch_size:
        raise ValueError(
            f"data.batch_size={config.data.batch_size} is more than the {per_rank} training images each of "
            f"{world_size} process(es) gets ({len(samples)} in all), which leaves no batch to train on; lower "
            f"it (--set data.batch_size={per_rank}), or use fewer processes or more data")


def _surgeries(config: TrainConfig) -> list:
    model = config.model
    chosen = [name for name in ("blurpool", "squeeze_excite") if getattr(model, name)]
    if model.stochastic_depth:
        chosen.append(("stochastic_depth", {"drop_rate": model.stochastic_depth}))
    if model.ghost_batch_size:
        chosen.append(("ghost_batchnorm", {"ghost_batch_size": model.ghost_batch_size}))
    if model.channels_last:
        chosen.append("channels_last")
    return chosen


def build_classifier(config: TrainConfig, num_classes: int) -> nn.Module:
    """The configured model with its surgeries applied and, for the BCE loss, its head's bias at -log(C)."""
    model = build_model(config.model.name, num_classes)
    if config.methods.loss == "bce":
        heads = [m for m in model.modules() if isinstance(m, nn.Linear) and m.out_features == num_classes]
        if not heads:
            raise ValueError(f"methods.loss='bce' needs a final nn.Linear with {num_classes} outputs in "
                             f"model {config.model.name!r}, found none")
        init_bce_bias_(heads[-1])
    surgeries = _surgeries(config)
    if surgeries:
        log.info("surgery:\n%s", apply_surgery(model, surgeries))
    return model


def build_methods(config: TrainConfig) -> list[Method]:
    methods_config, seed = config.methods, config.seed
    methods: list[Method] = []
    if methods_config.mixup_alpha:
        methods.append(MixUp(methods_config.mixup_alpha, seed=seed))
    if methods_config.cutmix_alpha:
        methods.append(CutMix(methods_config.cutmix_alpha, seed=seed))
    if methods_config.sam_rho:
        methods.append(SAM(methods_config.sam_rho, interval=methods_config.sam_interval))
    if methods_config.freeze_level:
        methods.append(LayerFreezing(methods_config.freeze_start, methods_config.freeze_level))
    if methods_config.ema_half_life_steps:
        methods.append(EMA(methods_config.ema_half_life_steps))
    if methods_config.swa:
        methods.append(SWA(methods_config.swa_start, methods_config.swa_end, methods_config.swa_lr))
    return methods


def _loaders(config: TrainConfig, data: Path, device: torch.device, subset: int | None, train_samples):
    train_root, eval_root = split_folders(data)
    train_source, classes = train_samples or training_samples(train_root, subset)
    d = config.data
    common = dict(batch_size=d.batch_size, device=device, backend=d.backend, seed=config.seed,
                  num_workers=None if d.num_workers < 0 else d.num_workers, channels_last=config.model.channels_last)
    progressive = ProgressiveResize(d.resize_initial_scale, d.resize_delay_fraction, d.resize_finetune_fraction,
                                    d.resize_size_increment) if d.progressive_resize else None
    train = build_loader(
        train_source, train=True, image_size=d.train_size, flip=d.flip, crop_scale=d.crop_scale,
        randaugment=RandAugmentOptions(d.randaugment_depth, d.randaugment_severity) if d.randaugment_depth else None,
        colout=ColOutOptions(d.colout, d.colout) if d.colout else None,
        progressive_resize=progressive, epochs=config.schedule.epochs, **common)
    evaluation = build_loader(eval_root, train=False, image_size=d.eval_size,
                              eval_crop_fraction=d.eval_size / d.eval_resize, **common)
    if evaluation.classes != classes:
        raise ValueError(f"the class folders of {train_root} and {eval_root} differ: "
                         f"{classes[:5]}... vs {evaluation.classes[:5]}...")
    return train, evaluation, len(classes)


def world_size_from_environment() -> int:
    """The number of processes torchrun started (1 without torchrun)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def check_distributed_support(config: TrainConfig) -> None:
    """Refuse, before any work, what DistributedDataParallel cannot train."""
    if world_size_from_environment() > 1 and config.methods.freeze_level > 0:
        # DDP fixes its gradient buckets when it wraps the model; parameters frozen later break them.
        raise ValueError("methods.freeze_level > 0 (layer freezing) does not work with several processes "
                         "(DistributedDataParallel); train with one process or set methods.freeze_level=0")


def joined_world_size() -> int:
    """The number of processes in the process group this one joined (1 when it joined none).

        >>> joined_world_size()
        1
    """
    return dist.get_world_size() if dist.is_initialized() else 1


def may_leave_parameters_unused(config: TrainConfig) -> bool:
    """Whether a training step may leave some parameters without a gradient.

    Stochastic depth (applied here in its "block" mode, which skips computing a dropped
    residual branch: that is its speed-up) leaves the dropped blocks' parameters out of the
    step. DistributedDataParallel must then look for unused parameters after every forward
    pass, a walk of the autograd graph that costs little next to the step; other runs skip it.
    Ranks seed torch's generator alike, so they normally drop the same blocks, and DDP leaves
    the gradients of parameters unused on every rank None, as one process would (checked with
    torch 2.14 on gloo). Computing the dropped branch and multiplying it by zero would avoid
    the walk but give up the speed-up, and its zero gradients would feed momentum and weight
    decay, unlike one process.

        >>> from training.recipes import get_recipe
        >>> may_leave_parameters_unused(get_recipe("cifar_hot")), may_leave_parameters_unused(get_recipe("cifar_mild"))
        (True, False)
    """
    return config.model.stochastic_depth > 0


def init_distributed(device: torch.device) -> torch.device:
    """Join the process group torchrun describes in the environment (if any); this process's device."""
    if world_size_from_environment() <= 1 or dist.is_initialized():
        return device
    if device.type == "cuda":
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return device


def build_trainer(config: TrainConfig, *, data: Path, out: Path | None, device: torch.device,
                  subset: int | None = None, progress: bool = True, eval_every: int = 1,
                  checkpoint_policy: CheckpointPolicy = CheckpointPolicy(),
                  train_samples: tuple[list[tuple[str, int]], list[str]] | None = None) -> Trainer:
    """A Trainer for ``config`` (scale schedule applied here) on ``data``'s train/ and val/ (or test/).

    ``subset``: train on the first ``subset`` images of each class; ``eval_every``,
    ``checkpoint_policy``: see Trainer. ``train_samples``: what :func:`training_samples` gives
    for ``data``'s train/ and ``subset``, when the caller scanned it already (an ImageNet tree
    takes seconds to walk: ``training.train`` walks it once).
    """
    config = scaled(config)
    torch.manual_seed(config.seed)  # the same initial weights for every rank and every rerun
    train, evaluation, num_classes = _loaders(config, data, device, subset, train_samples)
    model = build_classifier(config, num_classes).to(device)
    lr = effective_lr(config, joined_world_size())
    optimizer = build_optimizer(model, dataclasses.replace(config.optimizer, lr=lr))
    ddp_model = None
    if dist.is_initialized():
        ddp_model = nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None,
            find_unused_parameters=may_leave_parameters_unused(config))
    steps_per_epoch = len(train)
    return Trainer(
        model=model, optimizer=optimizer, ddp_model=ddp_model,
        loss_fn=classification_loss(config.methods.loss, config.methods.label_smoothing),
        train_loader=train, eval_loader=evaluation,
        total_steps=max(1, round(config.schedule.epochs * steps_per_epoch)),
        warmup_steps=round(config.schedule.warmup_epochs * steps_per_epoch),
        final_lr_fraction=config.schedule.final_lr_fraction, methods=build_methods(config),
        precision=config.precision, device=device, num_classes=num_classes, out=out, progress=progress,
        eval_every=eval_every, checkpoint_policy=checkpoint_policy)
