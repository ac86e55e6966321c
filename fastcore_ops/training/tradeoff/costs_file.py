"""The step costs' file, ``costs.json``: a cost pass writes it (:func:`write_costs`) and ``--times`` reads it back,
every field checked (:func:`read_costs`).

    >>> kind = StepKind("s", 32)
    >>> costs = StepCosts("cpu x", 2, 3, 8, 32, {kind: KindCost(kind, 0.2, 0.1, 24)},
    ...                   {"s": SetupCost("s", "cifar_mild", "fp32", 1.0, 0.5, 0.25, 2)})
    >>> write_costs(costs, out / COSTS_JSON)
    >>> read_costs(out / COSTS_JSON) == costs
    True
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path

from fastcore_ops.data.shards import JsonFields
from fastcore_ops.training.tradeoff.step_costs import KindCost, SetupCost, StepCosts
from fastcore_ops.training.tradeoff.step_kinds import MAX_PLANNED_STEPS, StepKind

COSTS_JSON = "costs.json"


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
