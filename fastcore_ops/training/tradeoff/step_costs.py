"""The step costs a cost pass measures and how they price a run; their file, ``costs.json``, is
:mod:`~fastcore_ops.training.tradeoff.costs_file`'s.

A run's modelled time is its setup (what the task does before the first step, patch whitening's pass over the
images), the starts of its image sizes and epochs, and the sum over its kinds of steps times seconds per step,
decoding mixed in by the share of images decoded afresh. What a method does once at the end of training (SWA's
BatchNorm pass) is not modelled.

    >>> ModelledTime(95.0, 5.0, 1.0, 1.0).seconds  # steps, decoding, starts, setup
    102.0
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from fastcore_ops.training.tradeoff.results import RunRecord
from fastcore_ops.training.tradeoff.step_kinds import RunPlan, StepKind


@dataclass(frozen=True)
class KindCost:
    """Seconds per step of one kind: with every image decoded, and with every image kept by the workers."""

    kind: StepKind
    decoded_seconds: float
    kept_seconds: float
    samples: int  # steps timed in each of the two ways, over all rounds


@dataclass(frozen=True)
class SetupCost:
    """What a setup's runs pay besides their steps, and the precision its steps were timed in."""

    setup: str
    recipe: str
    precision: str
    setup_seconds: float  # the task's work before the first step
    size_start_seconds: float  # a new image size's first steps, beyond their steady time
    epoch_start_seconds: float  # an epoch's first steps, beyond their steady time
    # The decoding workers its steps were timed with, which set how many images a run's later epochs find kept
    # (step_kinds.py); None in the files of passes before it was recorded (they decoded with one per core).
    decoding_workers: int | None = None


@dataclass(frozen=True)
class ModelledTime:
    """A run's modelled training time and its parts."""

    steps_seconds: float
    decoding_seconds: float
    starts_seconds: float
    setup_seconds: float

    @property
    def seconds(self) -> float:
        return self.steps_seconds + self.decoding_seconds + self.starts_seconds + self.setup_seconds

    def priced(self, record: RunRecord, machine: str) -> RunRecord:
        """``record`` as if trained in this time on the cost pass's ``machine``: its phases unknown, its throughput
        rescaled.

            >>> ModelledTime(45.0, 0.0, 4.0, 1.0).priced(RunRecord.made_up(seconds=100.0), "cpu x").samples_per_second
            400.0
        """
        one_off = self.setup_seconds + self.starts_seconds
        return dataclasses.replace(record, machine=f"{machine} (modelled)", train_seconds=self.seconds,
                                   first_epoch_seconds=max(0.0, one_off), phase_seconds={},
                                   samples_per_second=record.samples_per_second * record.train_seconds / self.seconds)


@dataclass(frozen=True)
class StepCosts:
    """The cost pass's result: each kind's and each setup's costs, and where and how they were measured."""

    machine: str
    threads: int
    rounds: int
    warmup: int
    timed: int
    kinds: dict[StepKind, KindCost]
    setups: dict[str, SetupCost]
    library: dict[str, str] = field(default_factory=dict)

    def missing(self, plan: RunPlan) -> list[StepKind]:
        """The kinds of ``plan`` these costs lack (a run of a setup, size or method state never timed)."""
        return [kind for kind in plan.steps if kind not in self.kinds or kind.setup not in self.setups]

    def modelled(self, plan: RunPlan) -> ModelledTime:
        """The training time of the run of ``plan`` on the cost pass's machine; ValueError for a kind never timed."""
        missing = self.missing(plan)
        if missing:
            raise ValueError(f"the steps {missing[0].describe()} of setup {missing[0].setup} were never timed")
        setup = self.setups[next(iter(plan.steps)).setup]
        steps = sum(count * self.kinds[kind].kept_seconds for kind, count in plan.steps.items())
        decoding = sum(share * (self.kinds[kind].decoded_seconds - self.kinds[kind].kept_seconds)
                       for kind, share in plan.decodes.items())
        starts = len(plan.sizes) * setup.size_start_seconds + (plan.epochs - 1) * setup.epoch_start_seconds
        return ModelledTime(steps, decoding, starts, setup.setup_seconds)
