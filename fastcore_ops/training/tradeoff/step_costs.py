"""The step costs a cost pass measures, how they price a run, and their file, ``costs.json``.

A run's modelled time is its setup (what the task does before the first step, patch whitening's pass over the
images), the starts of its image sizes and epochs, and the sum over its kinds of steps times seconds per step,
decoding mixed in by the share of images decoded afresh. What a method does once at the end of training (SWA's
BatchNorm pass) is not modelled.

    >>> kind = StepKind("s", 32)
    >>> costs = StepCosts("cpu x", 2, 3, 8, 32, {kind: KindCost(kind, 0.2, 0.1, 24)},
    ...                   {"s": SetupCost("s", "cifar_mild", "fp32", 1.0, 0.5, 0.25, 2)})
    >>> write_costs(costs, out / COSTS_JSON)
    >>> read_costs(out / COSTS_JSON) == costs
    True
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from fastcore_ops.data.shards import JsonFields
from fastcore_ops.training.tradeoff.results import RunRecord
from fastcore_ops.training.tradeoff.step_kinds import MAX_PLANNED_STEPS, RunPlan, StepKind

COSTS_JSON = "costs.json"


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


def write_costs(costs: StepCosts, path: Path) -> None:
    """Write ``costs`` as JSON (read back with :func:`read_costs`)."""
    document = {name: getattr(costs, name) for name in ("machine", "threads", "rounds", "warmup", "timed", "library")}
    document["kinds"] = [{**asdict(cost.kind), "methods": list(cost.kind.methods),
                          "decoded_seconds": cost.decoded_seconds, "kept_seconds": cost.kept_seconds,
                          "samples": cost.samples} for cost in costs.kinds.values()]
    document["setups"] = [asdict(setup) for setup in costs.setups.values()]
    path.write_text(json.dumps(document, indent=1) + "\n")


# More decoding workers than any machine runs: a costs.json naming more is not a cost pass's (and 1 / workers, in
# step_kinds.decode_share, overflows for an int past 1.8e308).
MAX_DECODING_WORKERS = 1 << 16


def read_costs(path: Path) -> StepCosts:
    """The costs a cost pass wrote to ``path``, every field checked (the file is untrusted); ValueError naming it.

    Every time must be a finite number: a step's seconds > 0 (a step takes time: zero prices a run at nothing),
    what a setup does before its first step >= 0 (0: nothing), and the starts' excess over steady steps, which may
    come out below zero, no lower than the pass could measure: every step of a window (at most ``warmup + timed``)
    taking no time at all.
    """
    fields = JsonFields(path, "pass a costs.json that python -m fastcore_ops.training.tradeoff --cost wrote")
    document = fields.keys("", fields.parse(fields.text()), ("machine", "threads", "rounds", "warmup", "timed",
                                                             "kinds", "setups", "library"))

    def finite(where: str, value, accepted: str) -> float:
        # JSON gives 1e400 as inf, and a 400-digit integer overflows float(): neither is a time.
        try:
            seconds = float(value) if type(value) in (int, float) else math.nan
        except OverflowError:
            seconds = math.inf
        if not math.isfinite(seconds):
            fields.fail(where, f"must be {accepted}, got {_shown(value)}")
        return seconds

    def seconds(where: str, value, *, zero: bool) -> float:
        accepted = "a finite number of seconds " + (">= 0" if zero else "> 0 (a step takes time)")
        result = finite(where, value, accepted)
        if not (result >= 0 if zero else result > 0):
            fields.fail(where, f"must be {accepted}, got {_shown(value)}")
        return result

    warmup, timed = fields.integer("warmup", document["warmup"]), fields.integer("timed", document["timed"], low=1)
    for key, steps in (("warmup", warmup), ("timed", timed)):  # a window's steps, inside a run a plan can walk
        if steps > MAX_PLANNED_STEPS:
            fields.fail(key, f"must be <= {MAX_PLANNED_STEPS} steps, got {steps}")
    kinds = {}
    for number, entry in enumerate(fields.kind("kinds", document["kinds"], list)):
        where = f"kinds[{number}]"
        fields.keys(where, entry, ("setup", "image_size", "methods", "decoded_seconds", "kept_seconds", "samples"))
        size = entry["image_size"]
        if size is not None:
            fields.integer(f"{where}.image_size", size, low=1)
        methods = tuple(fields.kind(f"{where}.methods[{index}]", state, str)
                        for index, state in enumerate(fields.kind(f"{where}.methods", entry["methods"], list)))
        kind = StepKind(fields.kind(f"{where}.setup", entry["setup"], str), size, methods)
        kinds[kind] = KindCost(kind, seconds(f"{where}.decoded_seconds", entry["decoded_seconds"], zero=False),
                               seconds(f"{where}.kept_seconds", entry["kept_seconds"], zero=False),
                               fields.integer(f"{where}.samples", entry["samples"], low=1))

    def start(where: str, value, setup: str, attribute: str) -> float:
        # The median over windows of (a window's first steps' seconds - the same steps' steady seconds): never below
        # minus the steady seconds of a whole window of the setup's slowest kind.
        excess = finite(where, value, "a finite number of seconds")
        lowest = -(warmup + timed) * max((getattr(cost, attribute) for kind, cost in kinds.items()
                                          if kind.setup == setup), default=0.0)
        if excess < lowest * (1 + 1e-9):
            fields.fail(where, f"must be a number of seconds >= {lowest:.6g} (no window of {warmup + timed} steps of "
                               f"setup {setup} starts faster than in no time), got {_shown(value)}")
        return excess

    setups = {}
    for number, entry in enumerate(fields.kind("setups", document["setups"], list)):
        where = f"setups[{number}]"
        fields.keys(where, entry, ("setup", "recipe", "precision", "setup_seconds", "size_start_seconds",
                                   "epoch_start_seconds"))
        name = fields.kind(f"{where}.setup", entry["setup"], str)
        workers = entry.get("decoding_workers")  # absent from the files of earlier passes
        if workers is not None and fields.integer(f"{where}.decoding_workers", workers) > MAX_DECODING_WORKERS:
            fields.fail(f"{where}.decoding_workers", f"must be <= {MAX_DECODING_WORKERS}, got {workers}")
        setup = SetupCost(name, *(fields.kind(f"{where}.{key}", entry[key], str) for key in ("recipe", "precision")),
                          seconds(f"{where}.setup_seconds", entry["setup_seconds"], zero=True),
                          start(f"{where}.size_start_seconds", entry["size_start_seconds"], name, "decoded_seconds"),
                          start(f"{where}.epoch_start_seconds", entry["epoch_start_seconds"], name, "kept_seconds"),
                          workers)
        setups[setup.setup] = setup
    library = fields.kind("library", document["library"], dict)
    for key, value in library.items():
        fields.kind(f"library.{key}", value, str)
    return StepCosts(machine=fields.kind("machine", document["machine"], str),
                     threads=fields.integer("threads", document["threads"], low=1),
                     rounds=fields.integer("rounds", document["rounds"], low=1), warmup=warmup, timed=timed,
                     kinds=kinds, setups=setups, library=library)


def _shown(value) -> str:
    """``value`` as an error shows it: its type and repr, cut short (a 400-digit integer)."""
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"
