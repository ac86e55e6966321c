"""The cost pass: time every kind of step a sweep's runs take, in one sitting, and price each run from its plan.

Top-1 does not depend on the machine's speed; time does. So a sweep's runs may train anywhere,
over several sessions, and one cost pass on one machine gives all of them comparable times. It
builds each run's trainer, counts its steps by kind (:mod:`fastcore_ops.training.tradeoff.step_kinds`), then
times real training steps of every kind with the loader and methods as a run has them there:
a fresh trainer is put at the kind's first step, as if resumed there, and trains a window of
steps twice over the same batches, first with every image decoded (its workers have kept
nothing yet), then with every image copied from their crop caches. The first ``warmup`` steps
of each window (and of each new image size in it) fill the pipeline and build kernels: they are
priced apart, as the start of an image size (first window) and of an epoch (second window).
Every window runs once per round, the windows of all recipes shuffled together, and each
kind's time is the median over rounds of its mean step time in a round.

A run's modelled time is then its setup (what the task does before the first step, patch
whitening's pass over the images), the starts of its image sizes and epochs, and the sum over
its kinds of steps times seconds per step, decoding mixed in by the share of images decoded
afresh. What a method does once at the end of training (SWA's BatchNorm pass) is not modelled.

    >>> costs = measure(windows, build, rounds=3)  # doctest: +SKIP
    >>> costs.modelled(plan).seconds  # doctest: +SKIP
    612.4
"""

from __future__ import annotations

import dataclasses
import json
import math
import platform
import random
import statistics
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from tqdm import tqdm

from fastcore_ops.data.shards import JsonFields
from fastcore_ops.training.config import TrainConfig
from fastcore_ops.training.tradeoff.machine import device_name
from fastcore_ops.training.tradeoff.results import RunRecord
from fastcore_ops.training.tradeoff.step_kinds import MAX_PLANNED_STEPS, RunPlan, StepKind, kind_function

WARMUP_STEPS = 8  # a window's first steps: pipeline filling, kernels built for a new shape
TIMED_STEPS = 32  # the steps of a window that are timed, at least
# A window goes on (up to LONGEST_WINDOW timed steps) until the kind it is for has MIN_SAMPLES steady steps in it:
# SAM's second pass on every 10th step needs about 80. A kind with as many in an earlier window gets none of its own.
MIN_SAMPLES = 8
LONGEST_WINDOW = 4 * TIMED_STEPS
COSTS_JSON = "costs.json"


@dataclass(frozen=True)
class Window:
    """Steps ``first_step`` to ``first_step + length - 1`` of a run of ``config`` (setup ``setup``, a run of ``recipe``),
    timed together; the first ``warmup`` of them (fewer in a run too short for a whole window) priced as its start."""

    config: TrainConfig
    setup: str
    recipe: str
    first_step: int
    length: int
    warmup: int


def choose_windows(kind_at: Callable[[int], StepKind], plan: RunPlan, config: TrainConfig, setup: str, recipe: str,
                   covered: dict[StepKind, int], warmup: int = WARMUP_STEPS, timed: int = TIMED_STEPS) -> list[Window]:
    """Windows that time every kind of ``plan`` not yet ``covered`` (timed steps per kind, updated here).

    Each starts at a kind's first step whose window fits in its epoch, else at its first step (the window then
    runs on into the next epochs: only with epochs shorter than a window, as in tests on a few images).
        >>> choose_windows(lambda step: StepKind("s", 32), plan, config, "s", "cifar_mild", {})  # doctest: +SKIP
        [Window(config=..., setup='s', recipe='cifar_mild', first_step=0, length=40, warmup=8)]
    """
    windows = []
    per_epoch = plan.steps_per_epoch
    for kind, first in sorted(plan.first_steps.items(), key=lambda item: item[1]):
        if covered.get(kind, 0) >= MIN_SAMPLES:
            continue
        # A window is at least min(warmup + timed, the steps left) long: where the epoch has fewer left, none fits,
        # and its length is not worked out (with epochs shorter than a window, that is every step of the run).
        candidates = ((step, window_length(kind_at, kind, step, plan.total_steps, warmup, timed))
                      for step in range(first, plan.total_steps)
                      if per_epoch - step % per_epoch >= min(warmup + timed, plan.total_steps - step)
                      and kind_at(step) == kind)
        start, length = next(((step, length) for step, length in candidates if per_epoch - step % per_epoch >= length),
                             (first, window_length(kind_at, kind, first, plan.total_steps, warmup, timed)))
        window = Window(config, setup, recipe, start, length, min(warmup, length // 2))
        windows.append(window)
        for step in timed_steps(kind_at, start, length, window.warmup):
            covered[kind_at(step)] = covered.get(kind_at(step), 0) + 1
    return windows


def window_length(kind_at: Callable[[int], StepKind], kind: StepKind, start: int, end: int, warmup: int,
                  timed: int) -> int:
    """The steps a window from ``start`` needs: ``warmup`` and ``timed`` steps, and more until ``MIN_SAMPLES`` of
    them are steady steps of ``kind``; at most ``warmup + LONGEST_WINDOW``, and never past step ``end``.

        >>> sam = StepKind("s", 16, ("sam",))
        >>> window_length(lambda step: sam if step % 10 == 0 else StepKind("s", 16), sam, 0, 1000, warmup=8, timed=32)
        81
    """
    length, longest = min(warmup + timed, end - start), min(warmup + LONGEST_WINDOW, end - start)
    steady = timed_steps(kind_at, start, length, warmup)
    count = sum(kind_at(step) == kind for step in steady)
    while count < MIN_SAMPLES and length < longest:
        length += 1
        steady = timed_steps(kind_at, start, length, warmup)
        count = sum(kind_at(step) == kind for step in steady)
    return length


def timed_steps(kind_at: Callable[[int], StepKind], start: int, length: int, warmup: int) -> list[int]:
    """The steps of a window that count as steady: past ``warmup`` steps from its start and from each change of
    image size within it.

        >>> timed_steps(lambda step: StepKind("s", 16 if step < 12 else 20), 0, 16, warmup=4)
        [4, 5, 6, 7, 8, 9, 10, 11]
    """
    steady, since_change, size = [], 0, None
    for step in range(start, start + length):
        current = kind_at(step).image_size
        since_change = since_change + 1 if current == size else 1
        size = current
        if since_change > warmup and step - start >= warmup:
            steady.append(step)
    return steady


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


def describe_machine(threads: int) -> str:
    """The CPU or GPU the steps ran on, as one line: its model name and, on a CPU, the thread count."""
    if torch.cuda.is_available():
        return torch.cuda.get_device_name()
    return f"{device_name('cpu')}, {threads} thread{'s' * (threads != 1)}"


def _median_of_round_means(samples: dict[int, list[float]]) -> float:
    return statistics.median(statistics.fmean(values) for values in samples.values() if values)


def measure(windows: Sequence[Window], build: Callable[[TrainConfig], object], *, rounds: int, threads: int,
            progress: bool = True) -> StepCosts:
    """Time every window ``rounds`` times, the windows shuffled together in each round (see the module's docstring).

    build: a fresh trainer for a configuration, out of nothing (no output folder).
    """
    # kind -> way ("decoded"/"kept") -> round -> step seconds, of steady steps and of every step; the windows'
    # first steps kept apart per setup.
    def by_kind_way_and_round() -> dict[StepKind, dict[str, dict[int, list[float]]]]:
        return defaultdict(lambda: defaultdict(lambda: defaultdict(list)))

    steady, every = by_kind_way_and_round(), by_kind_way_and_round()
    starts: dict[str, dict[str, list[list[tuple[StepKind, float]]]]] = defaultdict(lambda: defaultdict(list))
    setup_seconds: dict[str, list[float]] = defaultdict(list)
    precisions: dict[str, str] = {}
    workers: dict[str, int] = {}
    bar = tqdm(total=rounds * len(windows), desc="cost pass", unit="window", disable=not progress, dynamic_ncols=True)
    with bar:
        for round_number in range(rounds):
            order = list(windows)
            random.Random(round_number).shuffle(order)
            for window in order:
                trainer = build(window.config)
                try:
                    setup_seconds[window.setup].append(trainer.train_seconds)
                    precisions[window.setup] = trainer.precision.name
                    workers[window.setup] = getattr(trainer.train_loader, "decoding_workers", 0)
                    kind_at = kind_function(trainer, window.setup)
                    steady_steps = set(timed_steps(kind_at, window.first_step, window.length, window.warmup))
                    for way in ("decoded", "kept"):  # the second pass finds every crop in its worker's cache
                        seconds = trainer.time_steps(window.first_step, window.length)
                        first = []
                        for step, elapsed in zip(range(window.first_step, window.first_step + len(seconds)), seconds):
                            every[kind_at(step)][way][round_number].append(elapsed)
                            if step in steady_steps:
                                steady[kind_at(step)][way][round_number].append(elapsed)
                            else:
                                first.append((kind_at(step), elapsed))
                        starts[window.setup][way].append(first)
                finally:
                    trainer.train_loader.close()
                    trainer.task.close()
                bar.update()
    # A kind met only in start-up steps (a run too short for a steady step of it) is priced from those.
    kinds = {kind: KindCost(kind, _median_of_round_means(ways["decoded"]), _median_of_round_means(ways["kept"]),
                            sum(map(len, ways["decoded"].values())))
             for kind, ways in ((kind, steady[kind] if kind in steady else every[kind]) for kind in every)
             if ways["decoded"] and ways["kept"]}

    def excess(setup: str, way: str) -> float:
        # A window's first steps beyond what the same steps take once steady; the median over windows.
        attribute = "decoded_seconds" if way == "decoded" else "kept_seconds"
        return statistics.median(sum(elapsed - getattr(kinds[kind], attribute) for kind, elapsed in first
                                     if kind in kinds) for first in starts[setup][way])

    recipes = {window.setup: window.recipe for window in windows}
    setups = {setup: SetupCost(setup, recipes[setup], precisions[setup], statistics.median(setup_seconds[setup]),
                               excess(setup, "decoded"), excess(setup, "kept"), workers[setup])
              for setup in setup_seconds}
    return StepCosts(machine=describe_machine(threads), threads=threads, rounds=rounds,
                     warmup=max((window.warmup for window in windows), default=0),
                     timed=max((window.length - window.warmup for window in windows), default=0), kinds=kinds,
                     setups=setups, library={"torch": torch.__version__, "python": platform.python_version()})


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
