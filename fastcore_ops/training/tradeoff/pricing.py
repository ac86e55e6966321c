"""Each priced run's modelled time on the cost pass's machine, and the run as if it had trained there.

    >>> priced = model_runs(records, plans, costs)  # doctest: +SKIP
    >>> priced.records[0].machine  # doctest: +SKIP
    'Intel(R) Xeon(R) Processor, 2 threads (modelled)'
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from fastcore_ops.training.tradeoff.results import RunRecord
from fastcore_ops.training.tradeoff.step_costs import ModelledTime, StepCosts
from fastcore_ops.training.tradeoff.step_kinds import RunPlan


@dataclass(frozen=True)
class PricedRuns:
    """The usable runs priced: each one's modelled time by its key, and each as if trained on the cost pass's
    machine (:meth:`ModelledTime.priced`), in the order given."""

    modelled: dict[tuple, ModelledTime]
    records: list[RunRecord]


def model_runs(records: Sequence[RunRecord], plans: dict[tuple, RunPlan], costs: StepCosts,
               source: str = "the step times timed here") -> PricedRuns:
    """Each run's modelled time and the run as if trained on the cost pass's machine (:meth:`ModelledTime.priced`).

    ValueError naming the first run that takes a kind of step ``costs`` never timed, or whose modelled time is no
    finite number of seconds > 0 (``source``, where ``costs`` came from, named): a run takes time, and its measured
    throughput is rescaled by it.
    """
    for record in records:
        missing = costs.missing(plans[record.key])
        if missing:
            raise ValueError(f"run {record.label} takes steps the step times never cover ({missing[0].describe()} "
                             f"of setup {missing[0].setup}); time them: leave --times out")
    modelled = {record.key: costs.modelled(plans[record.key]) for record in records}
    priced = []
    for record in records:
        parts = modelled[record.key]
        problem = None if math.isfinite(parts.seconds) and parts.seconds > 0 else "a run takes a finite time > 0"
        if problem is None:
            try:  # the record the report writes (its throughput rescaled by the time), before anything is written
                priced.append(parts.priced(record, costs.machine))
            except (TypeError, ValueError) as error:
                problem = str(error)
        if problem is not None:
            raise ValueError(f"run {record.label}: {source} give it a modelled time of {parts.seconds:g} s (steps "
                             f"{parts.steps_seconds:g}, decoding {parts.decoding_seconds:g}, starts "
                             f"{parts.starts_seconds:g}, setup {parts.setup_seconds:g}), which cannot be: {problem}; "
                             f"time the steps again (leave --times out)")
    return PricedRuns(modelled, priced)
