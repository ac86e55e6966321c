"""Image classification: logits from images, a classification loss, top-1 and cross-entropy.

    >>> task = ImageClassification(eval_loader=[(torch.randn(4, 3), torch.tensor([0, 1, 2, 0]))], num_classes=3,
    ...                            loss_fn=lambda logits, targets: logits.sum(), device=torch.device("cpu"))
    >>> sums = task.evaluation_sums(torch.nn.Identity(), autocast=contextlib.nullcontext)
    >>> sorted(task.metrics(sums))
    ['eval_loss', 'top1']
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from fastcore_ops.data import Crops, build_loader
from fastcore_ops.data.loader import Loader
from fastcore_ops.data.order import samples_per_rank
from fastcore_ops.data.sources import find_samples
from fastcore_ops.training import models
from fastcore_ops.training.compute_threads import cpus_left_over
from fastcore_ops.training.config import TrainConfig
from fastcore_ops.training.data_identity import image_fingerprint
from fastcore_ops.training.losses import LossChoice, LossFunction
from fastcore_ops.training.methods.library import apply_surgery_methods
from fastcore_ops.training.methods.registry import IMAGES, MethodPlan, active
from fastcore_ops.training.methods.stem_freezing import StemFreezing
from fastcore_ops.training.models import check_timm_name, is_known_model, is_timm_name, model_names
from fastcore_ops.training.tasks.base import FloorBatch, Task
from fastcore_ops.training.tasks.registry import register_task

log = logging.getLogger("fastcore_ops.training")

TRAIN_FOLDERS = ("train",)
EVAL_FOLDERS = ("val", "test")


@register_task("image_classification")
class ImageClassification(Task):
    """Images to class logits; evaluated by top-1 accuracy and mean cross-entropy.

    eval_loader: batches of (images, int64 labels) on the device; this process's share.
    loss_fn: the training loss (it may take mixed, soft targets; evaluation always uses
        plain cross-entropy on the labels).
    evaluations: the evaluation methods on (test-time augmentation), by name: each one's
        ``probabilities(model, images, logits)`` are scored as ``top1_<name>`` beside ``top1``,
        which stays the single-view accuracy.
    train_loader, data_root: the run's training loader and its data folder, for :meth:`skipped_files`.
    """

    metric = "top1"
    higher_is_better = True
    metric_label = "top-1 (%)"
    sample_unit = "images"
    model_size_name = "num_classes"
    traits = IMAGES
    takes_subset = True
    # Every ablation of an image recipe also scores test-time augmentation (reported beside top1, not instead).
    ablation_assignments = ("methods.tta={}",)
    ablation_metrics = {"top1_tta": "Test-time augmentation"}

    @classmethod
    def model_names(cls) -> list[str]:
        return model_names()

    @classmethod
    def check_model(cls, model) -> None:
        if is_timm_name(model.name):
            check_timm_name(model.name)  # its own error says what is wrong: timm missing, or a name it lacks
        elif not is_known_model(model.name):
            raise ValueError(f"model.name must be one of fastcore_ops.training.models' models, a torchvision classifier or "
                             f"timm:<a timm model> (cifar_resnet20, resnet50, timm:resnet18, ...; "
                             f"fastcore_ops.training.models.model_names() lists all but timm's), got {model.name!r}")
        if model.options:
            raise ValueError(f"model.options must be {{}} for an image classifier (fastcore_ops.training.models.build_model "
                             f"takes no options), got {model.options!r}")

    @classmethod
    def check_data(cls, config, data, *, subset, world_size, progress=True):
        """The data folder and its training samples (:func:`training_samples`), once its folders are checked."""
        cls.check_inputs(data, subset)
        train_root, eval_root = split_folders(data)
        check_same_classes(train_root, eval_root)
        samples = training_samples(train_root, subset)
        check_shard_size(config, samples[0], world_size)
        return data, samples

    @classmethod
    def check_inputs(cls, data, subset):
        if data is None:
            raise ValueError("--data is required for image classification: a folder with train/ and val/ (or test/)")
        split_folders(data)

    @classmethod
    def data_fingerprint(cls, config, data, found):
        train_root, eval_root = split_folders(data)
        return image_fingerprint(train_root, found[0], eval_root)

    @classmethod
    def build(cls, config, plan, *, data, device, subset=None, found=None, strategy="ddp"):
        return build_image_classification(config, plan, data=data, device=device, subset=subset, train_samples=found)

    @classmethod
    def build_model(cls, config, size, surgeries):
        model = models.build_model(config.model.name, size)
        loss_choice(config).init_head_(model, size)
        apply_surgery_methods(model, surgeries)
        return model

    def __init__(self, *, eval_loader: Iterable, num_classes: int, loss_fn: LossFunction, device: torch.device,
                 evaluations: dict[str, object] | None = None, train_loader: Iterable | None = None,
                 data_root: Path | None = None):
        self.eval_loader, self.num_classes, self.loss_fn, self.device = eval_loader, num_classes, loss_fn, device
        self.evaluations = evaluations or {}
        self.train_loader, self.data_root = train_loader, data_root

    def log_lines(self) -> list[str]:
        return [self.train_loader.describe_decoding()] if isinstance(self.train_loader, Loader) else []

    def floor_batches(self, batches, steps, plan, device):
        """Random images and labels at each image size the run trains at (progressive resizing gives several), in
        the memory format its loader gives them; the steps after ``stem_freezing`` froze the stem apart."""
        freezing = next((hook for hook in plan.hooks if isinstance(hook, StemFreezing)), None)
        kinds = steps_by_kind(batches, steps, freezing.frozen_at if freezing is not None else lambda progress: False)
        memory_format = torch.channels_last if plan.loader_switches.get("channels_last") else torch.contiguous_format

        def batch_at(size: int) -> tuple[torch.Tensor, torch.Tensor]:
            images = torch.randn(batches.batch_size, 3, size, size, device=device)
            labels = torch.randint(0, self.num_classes, (batches.batch_size,), device=device)
            return images.contiguous(memory_format=memory_format), labels

        return [FloorBatch(f"{size}, stem frozen" if frozen else str(size), count, functools.partial(batch_at, size),
                           frozen_stem=frozen)
                for (frozen, size), count in sorted((kind[::-1], count) for kind, count in kinds.items())]

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return self.loss_fn(outputs, targets)

    def sample_losses(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        # Cross-entropy ranks the samples whatever the training loss: both fall as the true class's logit rises.
        return F.cross_entropy(outputs.float(), targets, reduction="none")

    def samples(self, targets: torch.Tensor) -> int:
        return len(targets)

    def evaluation_sums(self, model: torch.nn.Module, autocast: Callable[[], contextlib.AbstractContextManager],
                        batches: Callable[[Iterable, str], Iterable] = lambda loader, name: loader):
        # correct, loss sum, images, then correct by each evaluation method
        sums = torch.zeros(3 + len(self.evaluations), dtype=torch.float64, device=self.device)
        for images, labels in batches(self.eval_loader, "evaluation"):
            with autocast():
                logits = model(images)
                for row, options in enumerate(self.evaluations.values(), start=3):
                    sums[row] += (options.probabilities(model, images, logits).argmax(dim=1) == labels).sum()
            sums[0] += (logits.argmax(dim=1) == labels).sum()
            sums[1] += F.cross_entropy(logits.float(), labels, reduction="sum")
            sums[2] += len(labels)
        return sums

    def metrics(self, sums: torch.Tensor) -> dict[str, float]:
        correct, loss_sum, count, *by_method = sums.tolist()
        metrics = {"top1": correct / max(count, 1), "eval_loss": loss_sum / max(count, 1)}
        for name, method_correct in zip(self.evaluations, by_method):
            metrics[f"top1_{name}"] = method_correct / max(count, 1)
        return metrics

    def skipped_files(self) -> list[dict]:
        """The image files the training and evaluation loaders skipped, relative to ``data_root``, with the reason."""
        found = {}
        for loader in (self.train_loader, self.eval_loader):
            if isinstance(loader, Loader):
                found.update(loader.skipped_files)
        return [{"file": os.path.relpath(path, self.data_root) if self.data_root else path, "reason": reason}
                for path, reason in sorted(found.items())]

    def close(self) -> None:
        close = getattr(self.eval_loader, "close", None)
        if close is not None:
            close()


# ----------------------------------------------------------------------------------------
# From a configuration and an ImageFolder tree to the model, the training batches and the task
# ----------------------------------------------------------------------------------------


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


def steps_by_kind(loader: Loader, total_steps: int, frozen_at: Callable[[float], bool]) -> Counter:
    """How many of the run's ``total_steps`` train at each (image size, stem frozen): one size without progressive
    resizing; ``frozen_at(progress)``: whether a step starting at that fraction of the run has the stem frozen."""
    kinds = Counter()
    for step in range(total_steps):
        epoch, batch = divmod(step, len(loader))
        kinds[loader.image_size_at(epoch, batch) or loader.image_size, frozen_at(step / total_steps)] += 1
    return kinds


def _class_folders(root: Path) -> list[str]:
    return sorted(entry.name for entry in root.iterdir() if entry.is_dir())


def check_same_classes(train_root: Path, eval_root: Path) -> None:
    """Refuse training and evaluation folders whose classes differ (labels would not line up)."""
    train_classes, eval_classes = _class_folders(train_root), _class_folders(eval_root)
    if train_classes != eval_classes:
        only_train = sorted(set(train_classes) - set(eval_classes))
        only_eval = sorted(set(eval_classes) - set(train_classes))
        raise ValueError(f"the class folders of {train_root} and {eval_root} differ: only in {train_root.name}/: "
                         f"{only_train[:5]}, only in {eval_root.name}/: {only_eval[:5]}; both need the same classes")


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


def loss_choice(config: TrainConfig) -> LossChoice:
    """The run's loss: the softmax cross-entropy, as each loss-stage method on shapes it (``shape_loss``)."""
    loss = LossChoice()
    for _, options in active(config.methods, "loss"):
        loss = options.shape_loss(loss)
    return loss


def loss_function(config: TrainConfig) -> LossFunction:
    """The run's training loss function (:func:`loss_choice`)."""
    return loss_choice(config).function()


def default_decoding_workers(backend: str, device: torch.device) -> int | None:
    """The decoding workers of a run that sets none (``data.num_workers=-1``): for a step on a CPU with the
    pil backend, the CPUs its compute threads leave over, so none where they take every core; else
    build_loader's default (None: one per core).

    Workers decoding on the cores a CPU step computes on slow its forward and backward by more than the
    decoding costs in line: cifar_mild on two cores trained 1.13x faster decoding in the training process,
    to the same top-1 (``reports/cifar-step-floor-20261129/``). DALI's threads are left to its default.

        >>> default_decoding_workers("auto", torch.device("cpu")) == cpus_left_over()
        True
        >>> default_decoding_workers("auto", torch.device("cuda")) is None
        True
    """
    return cpus_left_over() if device.type == "cpu" and backend != "dali" else None


def _loader_settings(config: TrainConfig, plan: MethodPlan, device: torch.device) -> dict:
    """The build_loader arguments every loader of a run shares."""
    d = config.data
    workers = default_decoding_workers(d.backend, device) if d.num_workers < 0 else d.num_workers
    return dict(batch_size=d.batch_size, device=device, backend=d.backend, seed=config.seed, num_workers=workers,
                crops=Crops(scale=d.crop_scale, eval_fraction=d.eval_size / d.eval_resize), **plan.loader_switches)


def _loaders(config: TrainConfig, plan: MethodPlan, data: Path, train_samples, common: dict):
    """(training loader, evaluation loader, number of classes) of ``train_samples`` (:func:`training_samples`
    of the train/ folder of ``data``) and the val/ (or test/) folder of ``data``; ``common``: :func:`_loader_settings`."""
    train_root, eval_root = split_folders(data)
    train_source, classes = train_samples
    d = config.data
    train = build_loader(
        train_source, train=True, image_size=d.train_size, flip=d.flip, epochs=config.schedule.epochs,
        **plan.augmentations, **common)
    evaluation = build_loader(eval_root, train=False, image_size=d.eval_size, **common)
    if evaluation.classes != classes:
        raise ValueError(f"the class folders of {train_root} and {eval_root} differ: "
                         f"{classes[:5]}... vs {evaluation.classes[:5]}...")
    return train, evaluation, len(classes)


def build_image_classification(config: TrainConfig, plan: MethodPlan, *, data: Path, device: torch.device,
                               subset: int | None = None,
                               train_samples=None) -> tuple[nn.Module, object, ImageClassification]:
    """(model with its surgeries, training loader, task) for an image-classification ``config`` on ``data``.

    plan: the run's methods (:func:`fastcore_ops.training.methods.registry.plan_methods`): its surgeries apply here.
    subset: train on the first ``subset`` images of each class. train_samples: what
    :func:`training_samples` gives for the train/ folder of ``data`` and ``subset``, when the caller
    scanned it already (an ImageNet tree takes seconds to walk: ``fastcore_ops.training.train`` walks it once).
    """
    train_samples = train_samples or training_samples(split_folders(data)[0], subset)
    common = _loader_settings(config, plan, device)
    train, evaluation, num_classes = _loaders(config, plan, data, train_samples, common)
    loss = loss_choice(config)
    evaluations = {method.name: options for method, options in active(config.methods, "evaluation")}
    task = ImageClassification(eval_loader=evaluation, num_classes=num_classes, device=device,
                               loss_fn=loss.function(), evaluations=evaluations, train_loader=train, data_root=data)
    model = ImageClassification.build_model(config, num_classes, plan.surgeries).to(device)
    d = config.data
    for _, options in active(config.methods, "model"):
        task.setup_seconds += options.set_up_model(model, train_samples[0], image_size=d.train_size, **common)
    return model, train, task
