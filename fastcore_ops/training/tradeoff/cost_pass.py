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

The result is the step costs (:class:`fastcore_ops.training.tradeoff.step_costs.StepCosts`), which price each run.

    >>> costs = measure(windows, build, rounds=3, threads=4)  # doctest: +SKIP
    >>> costs.modelled(plan).seconds  # doctest: +SKIP
    612.4
"""

from __future__ import annotations

import platform
import random
import statistics
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from tqdm import tqdm

from fastcore_ops.training.config import TrainConfig
from fastcore_ops.training.tradeoff.machine import device_name
from fastcore_ops.training.tradeoff.step_costs import KindCost, SetupCost, StepCosts
from fastcore_ops.training.tradeoff.step_kinds import RunPlan, StepKind, kind_function

WARMUP_STEPS = 8  # a window's first steps: pipeline filling, kernels built for a new shape
TIMED_STEPS = 32  # the steps of a window that are timed, at least
# A window goes on (up to LONGEST_WINDOW timed steps) until the kind it is for has MIN_SAMPLES steady steps in it:
# SAM's second pass on every 10th step needs about 80. A kind with as many in an earlier window gets none of its own.
MIN_SAMPLES = 8
LONGEST_WINDOW = 4 * TIMED_STEPS


@dataclass(frozen=True)
class Window:
    """Steps ``first_step`` to ``first_step + length - 1`` of a run of ``config`` (setup ``setup``, recipe
    ``recipe``), timed together; the first ``warmup`` of them (fewer in a run too short for a whole window) priced as its start."""

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
