"""The interface every task implements; see :mod:`training.tasks`."""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager

import torch


class Task(abc.ABC):
    """Base class of the training tasks.

    Class attributes name the task's headline metric (the one the tradeoff tool compares),
    its direction, how plots label it, and what a training sample is.
    """

    metric: str
    higher_is_better: bool
    metric_label: str
    sample_unit: str
    num_classes: int = 0  # classes of the targets, for methods that mix labels; 0: not a classification
    # Seconds of training work done while the task was built (patch whitening reads images before the first
    # step): the trainer counts them in train_seconds, as the methods' time.
    setup_seconds: float = 0.0

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
        """The named metrics of the summed :meth:`evaluation_sums`; ``metric`` among them."""

    def skipped_files(self) -> list[dict]:
        """The input files this process left out as unreadable so far, each ``{"file": ..., "reason": ...}``, for
        ``summary.json``; none by default."""
        return []

    def close(self) -> None:
        """Release what the evaluation data holds (loader workers); nothing by default."""
