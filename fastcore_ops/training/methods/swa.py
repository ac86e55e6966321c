"""SWA: average the weights of the last epochs, trained at a constant learning rate.

Method card
    What: once ``start`` of the run is done, the learning rate of every param group is annealed
        (cosine or linear, over ``anneal_steps``) from its value at that moment to ``lr`` and
        held there, overriding the trainer's schedule; the weights at the end of every epoch
        from ``start`` to ``end`` are averaged with equal weights.
        At the end of the run the averaged model's BatchNorm statistics are recomputed on the
        training data, and evaluation runs the averaged model (Izmailov et al., 2018).
    When it helps: the average of points spread along a wide basin generalizes better than
        any one of them; a cheap gain at the end of runs long enough for several averaged
        epochs. The BatchNorm pass costs one extra forward epoch at the end.
    Options (``SWAOptions``): ``start`` in [0, 1) (0.7) and ``end`` in (start, 1] (1.0), the
        fractions of the run it averages over; ``lr`` (> 0, 0.01) a constant, fairly high learning
        rate (e.g. 0.05 x peak). The class also takes ``anneal_steps`` (>= 0; None: one epoch)
        and ``anneal_strategy`` "cos" or "linear".
    Composition: set after the trainer's scheduler step, so it wins over the schedule. With
        EMA the last method to set ``state.eval_model`` decides what is evaluated, so use one.
        Needs ``state.train_loader`` at fit end when the model has BatchNorm.
    In any training loop: ``torch.optim.swa_utils`` (``AveragedModel``, ``SWALR``, ``update_bn``),
        which this method drives on the run's schedule and checkpoints.

    >>> method = SWA(start_fraction=0.75, end_fraction=1.0, swa_lr=0.05)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch.optim.swa_utils import AveragedModel, update_bn

from fastcore_ops.checks import check_choice, check_int, check_number
from fastcore_ops.training.methods.base import Method, TrainState, averaged_module_weights
from fastcore_ops.training.methods.registry import register_method

ANNEAL_STRATEGIES = ("cos", "linear")


# A whole copy of the weights, which FSDP shards away.
@register_method("swa", stage="step", order=180, fsdp=False)
@dataclass(frozen=True)
class SWAOptions:
    """When SWA averages (fractions of the run) and the learning rate it holds; ``methods.swa``."""

    start: float = 0.7
    end: float = 1.0
    lr: float = 0.01

    def __post_init__(self) -> None:
        check_number("start", self.start, low=0, high=1, high_open=True)
        check_number("end", self.end, low=self.start, high=1, low_open=True)
        check_number("lr", self.lr, low=0, low_open=True)

    def attach(self, config) -> Method:
        return SWA(self.start, self.end, self.lr)


class SWA(Method):
    """Anneals to ``swa_lr``, averages end-of-epoch weights, and makes the average ``state.eval_model``.

    >>> method = SWA(start_fraction=0.7, end_fraction=1.0, swa_lr=0.01, anneal_steps=100)
    """

    def __init__(
        self,
        start_fraction: float,
        end_fraction: float,
        swa_lr: float,
        anneal_steps: int | None = None,
        anneal_strategy: str = "cos",
    ):
        self.start_fraction = check_number("start_fraction", start_fraction, low=0, high=1, high_open=True)
        self.end_fraction = check_number("end_fraction", end_fraction, low=start_fraction, high=1, low_open=True)
        self.swa_lr = check_number("swa_lr", swa_lr, low=0, low_open=True)
        if anneal_steps is not None:
            check_int("anneal_steps (None: one epoch)", anneal_steps, low=0)
        check_choice("anneal_strategy", anneal_strategy, ANNEAL_STRATEGIES)
        self.anneal_steps = anneal_steps
        self.anneal_strategy = anneal_strategy
        self._averaged: AveragedModel | None = None
        self._pending_state: dict[str, Any] | None = None
        # Step at which annealing began and each group's learning rate then; None until it begins.
        self._anneal_start_step: int | None = None
        self._anneal_start_lrs: list[float] = []

    @property
    def averaged_model(self) -> torch.nn.Module | None:
        """The averaged module (None before the run starts)."""
        return None if self._averaged is None else self._averaged.module

    @property
    def averaged_count(self) -> int:
        """How many end-of-epoch weights the average holds."""
        return 0 if self._averaged is None else int(self._averaged.n_averaged)

    def on_fit_start(self, state: TrainState) -> None:
        # Plain average of the parameters; buffers follow the model and BatchNorm's are
        # recomputed at fit end, as averaged running statistics would not match averaged weights.
        self._averaged = AveragedModel(state.model)
        self._averaged.requires_grad_(False)
        if self._pending_state is not None:
            self._load(self._pending_state)
            self._pending_state = None

    def on_step_end(self, state: TrainState) -> None:
        if state.progress < self.start_fraction:
            return
        groups = state.optimizer.param_groups
        if self._anneal_start_step is None:
            self._anneal_start_step = state.step
            self._anneal_start_lrs = [group["lr"] for group in groups]
        anneal_steps = state.steps_per_epoch if self.anneal_steps is None else self.anneal_steps
        done = 1.0 if anneal_steps == 0 else min(1.0, (state.step - self._anneal_start_step) / anneal_steps)
        # SWALR is not used: its recursive update assumes no other scheduler touches the
        # learning rate, while here the trainer's scheduler sets it before every call.
        remaining = (1 + math.cos(math.pi * done)) / 2 if self.anneal_strategy == "cos" else 1.0 - done
        for group, start_lr in zip(groups, self._anneal_start_lrs):
            group["lr"] = self.swa_lr + (start_lr - self.swa_lr) * remaining

    def on_epoch_end(self, state: TrainState) -> None:
        if self.start_fraction <= state.progress <= self.end_fraction:
            self._averaged.update_parameters(state.model)

    def on_fit_end(self, state: TrainState) -> None:
        if self.averaged_count == 0:
            self._averaged.update_parameters(state.model)
        has_batch_norm = any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in state.model.modules())
        if has_batch_norm:
            if state.train_loader is None:
                raise ValueError(
                    "state.train_loader is None; SWA needs the training batches to recompute BatchNorm statistics"
                )
            # A pass over one more epoch of the training batches, asked for as such: a loader iterated
            # again without set_epoch warns that it repeats an epoch by accident.
            set_epoch = getattr(state.train_loader, "set_epoch", None)
            if set_epoch is not None:
                set_epoch(state.epoch)
            update_bn(state.train_loader, self._averaged, device=state.device)
        state.eval_model = self._averaged.module

    def state_dict(self) -> dict[str, Any]:
        if self._averaged is None:
            return {}
        return {
            "averaged_model": self._averaged.state_dict(),
            "anneal_start_step": self._anneal_start_step,
            "anneal_start_lrs": list(self._anneal_start_lrs),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        expected = {"averaged_model", "anneal_start_step", "anneal_start_lrs"}
        if set(state) != expected:
            raise ValueError(f"SWA state must have the keys {sorted(expected)}, got {sorted(state)}")
        if self._averaged is None:
            # Loaded before the run started: applied once on_fit_start has built the average.
            self._pending_state = state
        else:
            self._load(state)

    def evaluated_weights(self, saved: dict[str, Any], finished: bool) -> dict[str, Any] | None:
        # The average becomes the evaluation model at the run's end only (on_fit_end, after its BatchNorm pass).
        return averaged_module_weights(saved.get("averaged_model")) if saved and finished else None

    def _load(self, state: dict[str, Any]) -> None:
        self._averaged.load_state_dict(state["averaged_model"])
        self._anneal_start_step = state["anneal_start_step"]
        self._anneal_start_lrs = list(state["anneal_start_lrs"])
