"""The run of ``python -m benchmarks.composer_job`` (its module says what it runs and how), imported once its
command line is parsed: ``check`` and ``job`` for :func:`benchmarks.job_cli.job_command`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import time
from pathlib import Path

import torch
import torchvision
from torch import nn
from torchvision import transforms

from fastcore_ops.data.backends.pil import default_num_workers
from fastcore_ops.data.transforms.device_stage import IMAGENET_MEAN, IMAGENET_STD
from fastcore_ops.training.assemble import effective_lr, scaled
from fastcore_ops.training.config import TrainConfig
from fastcore_ops.training.methods.registry import IMAGES, active, plan_methods
from fastcore_ops.training.optim import build_optimizer
from fastcore_ops.training.precision import Precision
from fastcore_ops.training.tasks.classification import build_image_classification, first_per_class, split_folders
from fastcore_ops.training.tasks.registry import task_named


# What this job can hand to Composer's algorithms; a recipe with anything else is refused.
# Our methods in Composer's terms: each turned into its Composer algorithm (a translation to another
# library, not a list of our methods); the BCE loss and patch whitening are set up as ours are.
_COMPOSER_ALGORITHMS = {
    "blurpool": lambda options: ("BlurPool", {}),
    "channels_last": lambda options: ("ChannelsLast", {}),
    "label_smoothing": lambda options: ("LabelSmoothing", {"smoothing": options.smoothing}),
    "progressive_resize": lambda options: ("ProgressiveResizing", dataclasses.asdict(options)),
}
_SET_UP_AS_OURS = {"bce_loss", "patch_whitening"}


# Composer's names of the precisions it autocasts to itself (on CUDA).
_COMPOSER_PRECISION = {None: "fp32", torch.bfloat16: "amp_bf16", torch.float16: "amp_fp16"}


class AutocastForward(nn.Module):
    """``module`` with its forward under ``precision``'s autocast, float32 logits out: Composer's CPU bf16."""

    def __init__(self, module: nn.Module, device: torch.device, precision: Precision):
        super().__init__()
        self.module, self.device, self.precision = module, device, precision

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        with self.precision.autocast(self.device):
            return self.module(images).float()


def check(config: TrainConfig) -> None:
    """ValueError unless every method of ``config`` is one this job hands to Composer or sets up as ours."""
    handled = _COMPOSER_ALGORITHMS.keys() | _SET_UP_AS_OURS
    others = [f"methods.{method.name}" for method, _ in active(config.methods) if method.name not in handled]
    others += [f"task {config.task!r}"] * (not IMAGES <= task_named(config.task).traits)
    others += ["compile"] * config.compile
    if others:
        raise ValueError(f"recipe {config.name!r} has {', '.join(others)}: the Composer job sets up image "
                         f"classification with {', '.join(sorted(handled))} only")


def composer_algorithms(config: TrainConfig) -> list:
    """Composer's algorithms for ``config``'s methods, with the recipe's settings."""
    import composer.algorithms

    algorithms = []
    for method, options in active(config.methods):
        if method.name in _COMPOSER_ALGORITHMS:
            name, arguments = _COMPOSER_ALGORITHMS[method.name](options)
            algorithms.append(getattr(composer.algorithms, name)(**arguments))
    return algorithms


def torchvision_loader(config: TrainConfig, train_root: Path, subset: int | None) -> torch.utils.data.DataLoader:
    """The images of ``train_root`` (the first ``subset`` per class) through torchvision's usual per-image
    pipeline, with ``config``'s crop and flip.

        >>> from fastcore_ops.training.recipes import get_recipe
        >>> train = Path("../shared/datasets/cifar10-jpeg/train")
        >>> loader = torchvision_loader(get_recipe("cifar_baseline"), train, subset=2)  # doctest: +SKIP
        >>> loader.dataset.transform.transforms[:2]  # doctest: +SKIP
        [Resize(size=(32, 32), interpolation=bilinear, max_size=None, antialias=True), RandomHorizontalFlip(p=0.5)]
    """
    d, methods = config.data, config.methods
    if methods.randaugment is not None or methods.colout is not None:
        raise ValueError(f"recipe {config.name!r}: --loader torchvision applies crops and flips only; "
                         f"use --loader ours for RandAugment and ColOut")
    size = (d.train_size, d.train_size)
    crop = transforms.Resize(size) if d.crop_scale == (1.0, 1.0) else transforms.RandomResizedCrop(size, d.crop_scale)
    steps = [crop]
    if methods.padded_crop is not None:
        padding = round(methods.padded_crop.fraction * d.train_size)
        steps.append(transforms.RandomCrop(size, padding=padding,
                                           padding_mode="constant" if methods.padded_crop.fill == "zero" else "reflect"))
    steps += [transforms.RandomHorizontalFlip()] * d.flip
    steps += [transforms.ToTensor(), transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)]
    dataset = torchvision.datasets.ImageFolder(str(train_root), transforms.Compose(steps))
    if subset is not None:
        dataset.samples = dataset.imgs = first_per_class(train_root, subset)[0]
        dataset.targets = [label for _, label in dataset.samples]
    workers = default_num_workers() if d.num_workers < 0 else d.num_workers
    return torch.utils.data.DataLoader(dataset, batch_size=d.batch_size, shuffle=True, drop_last=True,
                                       num_workers=workers, persistent_workers=workers > 0)


def run(config: TrainConfig, *, data: Path, device: torch.device, subset: int | None, loader: str,
        precision: Precision) -> dict:
    """Train ``config`` (scale schedule applied) through Composer's Trainer; the summary it writes."""
    from composer import Trainer
    from composer.loss import binary_cross_entropy_with_logits, soft_cross_entropy
    from composer.models import ComposerClassifier
    from composer.optim import CosineAnnealingWithWarmupScheduler

    config = scaled(config)
    # Our loader at the full size, without our surgeries or resizing: Composer's algorithms do those.
    plain = dataclasses.replace(config, methods=dataclasses.replace(
        config.methods, **{name: None for name in _COMPOSER_ALGORITHMS if name != "label_smoothing"}))
    plan = plan_methods(plain)
    torch.manual_seed(config.seed)  # the initial weights fastcore_ops.training.train starts from
    model, train_loader, task = build_image_classification(plain, plan, data=data, device=device, subset=subset)
    if loader == "torchvision":
        train_loader.close()
        train_loader = torchvision_loader(config, split_folders(data)[0], subset)
    optimizer = build_optimizer(model, dataclasses.replace(config.optimizer, lr=effective_lr(config, 1)))
    steps = max(1, round(config.schedule.epochs * len(train_loader)))
    warmup = round(config.schedule.warmup_epochs * len(train_loader))
    loss_fn = soft_cross_entropy if config.methods.bce_loss is None else binary_cross_entropy_with_logits
    # On CUDA Composer autocasts itself; on a CPU it cannot, so the forward is wrapped.
    on_cuda = device.type == "cuda"
    wrapped = AutocastForward(model, device, Precision(None, "Composer autocasts") if on_cuda else precision)
    trainer = Trainer(
        model=ComposerClassifier(wrapped, num_classes=task.num_classes, loss_fn=loss_fn),
        train_dataloader=train_loader, max_duration=f"{steps}ba", optimizers=optimizer,
        schedulers=CosineAnnealingWithWarmupScheduler(t_warmup=f"{warmup}ba",
                                                      alpha_f=config.schedule.final_lr_fraction),
        algorithms=composer_algorithms(config), device="gpu" if device.type == "cuda" else "cpu",
        precision=_COMPOSER_PRECISION[precision.dtype] if on_cuda else "fp32",
        seed=config.seed, progress_bar=False, log_to_console=False, loggers=[], save_folder=None)
    started = time.perf_counter()
    trainer.fit()
    fit_seconds = time.perf_counter() - started
    wrapped.eval()
    with torch.no_grad():
        metrics = task.metrics(task.evaluation_sums(wrapped, contextlib.nullcontext))
    trainer.close()
    task.close()
    return {"metrics": metrics, "steps": int(trainer.state.timestamp.batch), "setup_seconds": task.setup_seconds,
            "fit_seconds": fit_seconds, "train_seconds": task.setup_seconds + fit_seconds}

def job(args) -> dict:
    """The run ``args`` asks for, with Composer imported from ``--peers``."""
    sys.path.append(str(args.peers.resolve()))  # after this environment's packages: ours win where both have one
    return run(args.config, data=args.data, device=args.device, subset=args.subset, loader=args.loader,
               precision=args.precision)
