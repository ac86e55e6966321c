"""The cost pass's report out: the step costs, the model against each run, and the tradeoff report on both times.

- ``OUT/costs.json`` and ``OUT/costs.md``: every kind's and setup's costs, and where they were measured;
- ``OUT/modelled-vs-measured.md``: every run's measured and modelled time side by side, with the model's error;
- ``OUT/`` the tradeoff report on modelled times (every run on the cost pass's machine);
- ``OUT/measured/`` the same report on the times the runs measured, machine by machine.

    >>> write_cost_report(table, model_runs(table.records, plans, costs), costs, Path("out"), "cifar_baseline",
    ...                   timed_here=True)  # doctest: +SKIP
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path

from fastcore_ops.training.tradeoff.planning import Report
from fastcore_ops.training.tradeoff.pricing import PricedRuns
from fastcore_ops.training.tradeoff.report import build_report
from fastcore_ops.training.tradeoff.results import RunRecord
from fastcore_ops.training.tradeoff.run_table import RunTable
from fastcore_ops.training.tradeoff.costs_file import COSTS_JSON, write_costs
from fastcore_ops.training.tradeoff.step_costs import ModelledTime, StepCosts
from fastcore_ops.training.tradeoff.tables import markdown_table

MEASURED = "measured"  # OUT's subfolder for the report on measured times
COSTS_MD = "costs.md"
CHECK_MD = "modelled-vs-measured.md"


def _kind_rows(costs: StepCosts) -> tuple[list[str], list[list[str]]]:
    header = ["recipe", "precision", "kind", "ms/step, images decoded", "ms/step, images kept", "steps timed"]
    rows = [[costs.setups[kind.setup].recipe, costs.setups[kind.setup].precision, kind.describe(),
             f"{1000 * cost.decoded_seconds:.1f}", f"{1000 * cost.kept_seconds:.1f}", str(cost.samples)]
            for kind, cost in sorted(costs.kinds.items())]
    return header, rows


def _setup_rows(costs: StepCosts) -> tuple[list[str], list[list[str]]]:
    header = ["recipe", "setup", "precision", "decoding workers", "before the first step (s)",
              "an image size's start (s)", "an epoch's start (s)"]
    rows = [[setup.recipe, setup.setup, setup.precision,
             "unrecorded (one per core)" if setup.decoding_workers is None else str(setup.decoding_workers),
             f"{setup.setup_seconds:.2f}", f"{setup.size_start_seconds:.2f}", f"{setup.epoch_start_seconds:.2f}"]
            for setup in costs.setups.values()]
    return header, rows


def model_error(record: RunRecord, modelled: ModelledTime) -> float:
    """The modelled time's error relative to the measured one (0.03: 3% too long).

        >>> round(model_error(RunRecord.made_up(seconds=100.0), ModelledTime(95.0, 5.0, 1.0, 1.0)), 6)
        0.02
    """
    return modelled.seconds / record.train_seconds - 1


def _run_rows(records: Sequence[RunRecord], modelled: dict[tuple, ModelledTime]) -> tuple[list[str], list[list[str]]]:
    header = ["run", "measured on", "in", "measured (s)", "modelled (s)", "error", "steps", "decoding (s)",
              "starts (s)", "setup (s)"]
    rows = [[record.label, record.machine, record.precision or "unrecorded", f"{record.train_seconds:.1f}",
             f"{modelled[record.key].seconds:.1f}",
             f"{100 * model_error(record, modelled[record.key]):+.1f}%", str(record.steps),
             f"{modelled[record.key].decoding_seconds:.1f}", f"{modelled[record.key].starts_seconds:.1f}",
             f"{modelled[record.key].setup_seconds:.1f}"] for record in records]
    return header, rows


def error_summary(records: Sequence[RunRecord], modelled: dict[tuple, ModelledTime]) -> str:
    """One sentence on the model's error over ``records``: mean absolute, largest, and the mean signed error.

        >>> error_summary([RunRecord.made_up(seconds=100.0)], {RunRecord.made_up().key: ModelledTime(104, 0, 0, 0)})
        'Over 1 runs the modelled time is off by 4.0% on average (largest 4.0%, r x1 seed 0); mean signed error +4.0%.'
    """
    errors = {record.label: model_error(record, modelled[record.key]) for record in records}
    worst = max(errors, key=lambda label: abs(errors[label]))
    mean_size = 100 * statistics.fmean(map(abs, errors.values()))
    return (f"Over {len(errors)} runs the modelled time is off by {mean_size:.1f}% on average (largest "
            f"{100 * abs(errors[worst]):.1f}%, {worst}); mean signed error {100 * statistics.fmean(errors.values()):+.1f}%.")


def write_cost_report(table: RunTable, priced: PricedRuns, costs: StepCosts, out: Path, baseline: str, *,
                      timed_here: bool, report: Report = build_report) -> list[Path]:
    """Write costs.json (when ``timed_here``), costs.md, modelled-vs-measured.md, the ``report`` on ``priced`` (the
    usable runs of ``table`` on modelled times) to ``out`` and on ``table`` (measured times) to ``out/measured``;
    the paths written."""
    records, modelled = table.records, priced.modelled
    out.mkdir(parents=True, exist_ok=True)
    written = []
    if timed_here:
        write_costs(costs, out / COSTS_JSON)
        written.append(out / COSTS_JSON)
    library = ", ".join(f"{name} {version}" for name, version in costs.library.items())
    (out / COSTS_MD).write_text(f"""# Step costs on {costs.machine}

{costs.rounds} rounds; in each, every window of {costs.warmup} start-up steps and up to {costs.timed} timed steps,
twice: with every image decoded, then with every image kept by the decoding workers; {library}.
Each kind's time is the median over rounds of its mean step time in a round.

{markdown_table(*_setup_rows(costs))}

{markdown_table(*_kind_rows(costs))}
""")
    (out / CHECK_MD).write_text(f"""{error_summary(records, modelled)} A run measured beside other work, or on another
machine, is not expected to match (the machine column names where each run was measured).

{markdown_table(*_run_rows(records, modelled))}
""")
    written += [out / COSTS_MD, out / CHECK_MD]
    for runs, folder in ((priced.records, out), (records, out / MEASURED)):  # modelled times, then measured ones
        written += report([*runs, *table.left_out], folder, baseline)
    return written
