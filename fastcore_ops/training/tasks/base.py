"""The interface every task implements; see :mod:`fastcore_ops.training.tasks`."""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import torch
from torch import nn


def metric_phrase(label: str, value: float) -> str:
    """A task's metric as one phrase, from its ``metric_label``: a percentage where the label says so.

        >>> metric_phrase("top-1 (%)", 0.612), metric_phrase("validation loss (nats/token)", 1.2345)
        ('top-1 61.20%', 'validation loss (nats/token) 1.2345')
    """
    if label.endswith("(%)"):
        return f"{label[:-4]} {100 * value:.2f}%"
    return f"{label} {value:.4f}"


@dataclass(frozen=True)
class FloorBatch:
    """One shape of batch a run trains on, for the step floor (:meth:`Task.floor_batches`).

    label: the shape's name in the floor's summary (an image size: "224"); steps: how many of the run's steps train
    on it; make: () -> (inputs, targets), one such batch in memory; frozen_stem: those steps train with the
    model's stem frozen (``stem_freezing``), so the floor times them so.

        >>> FloorBatch("4", 16, lambda: (torch.zeros(2, 4), torch.zeros(2))).make()[0].shape
        torch.Size([2, 4])
    """

    label: str
    steps: int
    make: Callable[[], tuple[torch.Tensor, torch.Tensor]]
    frozen_stem: bool = False


class Task(abc.ABC):
    """Base class of the training tasks.

    The class is what a task registers (:func:`fastcore_ops.training.tasks.registry.register_task`): its class
    attributes and class methods say what the rest of the code asks of the task before a run
    starts (its models, its data check and fingerprint, what it builds, its sweep defaults). An
    instance, made by :meth:`build`, scores one run's batches and evaluates it.

    Class attributes name the task's headline metric (the one the tradeoff tool compares),
    its direction, how plots label it, and what a training sample is.
    """

    name: ClassVar[str]  # set by register_task
    metric: ClassVar[str]
    higher_is_better: ClassVar[bool]
    metric_label: ClassVar[str]
    sample_unit: ClassVar[str]
    # What the task's batches hold, for the methods that need it (fastcore_ops.training.methods.registry's IMAGES, TEXT).
    traits: ClassVar[frozenset[str]] = frozenset()
    takes_subset: ClassVar[bool] = False  # whether ``--subset`` (the first N samples of each class) applies
    shards_model: ClassVar[bool] = False  # whether ``--strategy fsdp`` can shard its models
    ablation_assignments: ClassVar[tuple[str, ...]] = ()  # ``--set`` values every ablation of its recipes adds
    # Metrics those settings add, each reported against ``metric`` on an ablation's base: name -> what it measures.
    ablation_metrics: ClassVar[dict[str, str]] = {}
    num_classes: int = 0  # classes of the targets, for methods that mix labels; 0: not a classification
    # What the data decides of the model (build_model's size), as an export's model.json names it: num_classes.
    model_size_name: ClassVar[str]
    # Seconds of training work done while the task was built (patch whitening reads images before the first
    # step): the trainer counts them in train_seconds, as the methods' time.
    setup_seconds: float = 0.0

    @classmethod
    @abc.abstractmethod
    def model_names(cls) -> list[str]:
        """The ``model.name`` values the task trains (those a user is told of)."""

    @classmethod
    def check_model(cls, model) -> None:
        """Refuse a ``model`` section (:class:`fastcore_ops.training.config.ModelConfig`) the task cannot build."""
        if model.name not in cls.model_names():
            raise ValueError(f"model.name must be one of {', '.join(cls.model_names())} for task {cls.name!r}, "
                             f"got {model.name!r}")

    @classmethod
    @abc.abstractmethod
    def check_data(cls, config, data: Path | None, *, subset: int | None, world_size: int,
                   progress: bool = True) -> tuple[Path | None, object]:
        """(the data folder the run reads, what the check found in it to build from) for ``--data``, checked before
        any work: a ValueError or OSError names what is wrong with it."""

    @classmethod
    def check_inputs(cls, data: Path | None, subset: int | None) -> None:
        """Refuse a ``--data`` and ``--subset`` that no run could use, cheaply (no data is read): what a sweep checks
        before it trains anything; :meth:`check_data` checks the data itself. By default: ``--subset`` only where the
        task ``takes_subset``."""
        if subset is not None and not cls.takes_subset:
            raise ValueError(f"--subset (samples per class) does not apply to task {cls.name!r}; leave it out")

    @classmethod
    @abc.abstractmethod
    def data_fingerprint(cls, config, data: Path | None, found: object) -> dict:
        """What identifies the data the run trains and evaluates on: ``{part: {"files", "bytes", "sha256"}}``
        (:mod:`fastcore_ops.training.data_identity`); a resume refuses other data."""

    @classmethod
    @abc.abstractmethod
    def build(cls, config, plan, *, data: Path | None, device: torch.device, subset: int | None = None,
              found: object = None, strategy: str = "ddp") -> tuple[nn.Module, object, Task]:
        """(model with its surgeries, training batches, the run's task) for ``config`` on the checked ``data``.

        plan: the run's methods (:func:`fastcore_ops.training.methods.registry.plan_methods`). found: what
        :meth:`check_data` found, when the caller has it (None: look again). strategy: "ddp" or "fsdp".
        """

    @classmethod
    def build_model(cls, config, size: int, surgeries) -> nn.Module:
        """``config``'s model with ``size`` outputs (``model_size_name``), the run's ``surgeries`` applied
        (:attr:`~fastcore_ops.training.methods.registry.MethodPlan.surgeries`), on the default device: the model :meth:`build`
        trains, and what ``fastcore_ops.training.export.load_model`` rebuilds to load a run's weights into.

        A task without it trains, but its runs cannot be exported.
        """
        raise ValueError(f"task {cls.name!r} does not say how to rebuild its model (Task.build_model), so its runs "
                         f"cannot be exported; define build_model on its class")

    @classmethod
    def keep_run_files(cls, out: Path, data: Path | None, found: object, *, resume: bool, write: bool = True) -> None:
        """Save with a new run in ``out`` what later uses of it need from the data, or on resume refuse data that
        does not match them; nothing by default. found: what :meth:`check_data` found. write: whether this process
        writes."""

    def log_lines(self) -> list[str]:
        """Lines for a run's log on how it reads its training data (who decodes an image task's files); none by
        default."""
        return []

    def floor_batches(self, batches, steps: int, plan, device: torch.device) -> list[FloorBatch]:
        """What the step floor (``python -m benchmarks.step_floor``) times the run's model on, forward plus backward:
        each shape of batch the run's ``steps`` train on, with how many train on it and one such batch to make on
        ``device``. batches: the run's training batches; plan: its methods.

        By default one shape, the first training batch's, for every step.
        """
        inputs, targets = next(iter(batches))
        inputs, targets = inputs.to(device), targets.to(device)
        return [FloorBatch("x".join(map(str, inputs.shape[1:])), steps, lambda: (inputs, targets))]

    def forward(self, model: torch.nn.Module, inputs: torch.Tensor) -> torch.Tensor:
        """The outputs the loss takes (logits) for a training batch."""
        return model(inputs)

    @abc.abstractmethod
    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """The training loss of a batch's outputs (a scalar)."""

    @abc.abstractmethod
    def sample_losses(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Each sample's own loss, (N,) for a batch of N rows: what selective backprop ranks."""

    @abc.abstractmethod
    def samples(self, targets: torch.Tensor) -> int:
        """How many training samples (``sample_unit``) a batch with these targets holds."""

    @abc.abstractmethod
    def evaluation_sums(self, model: torch.nn.Module, autocast: Callable[[], AbstractContextManager],
                        batches: Callable[[Iterable, str], Iterable] = lambda loader, name: loader) -> torch.Tensor:
        """float64 sums over this process's evaluation data, which the trainer adds over processes.

        batches: what each evaluation loader is read through, with a name for it (the trainer's
        progress bar); by default the loader itself.
        """

    @abc.abstractmethod
    def metrics(self, sums: torch.Tensor) -> dict[str, float]:
        """The named metrics of the summed :meth:`evaluation_sums`: ``metric``, and ``eval_loss`` (the mean
        evaluation loss, which the run's curves plot beside the training loss) among them."""

    def skipped_files(self) -> list[dict]:
        """The input files this process left out as unreadable so far, each ``{"file": ..., "reason": ...}``, for
        ``summary.json``; none by default."""
        return []

    def close(self) -> None:
        """Release what the evaluation data holds (loader workers); nothing by default."""
