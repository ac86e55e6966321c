"""``python -m fastcore_ops.training.tradeoff --cost FOLDER...``: price a sweep's runs on this machine; report on modelled times.

A pipeline of stages, each its own module, each run once: the runs in, with the configuration each trained
(:mod:`~fastcore_ops.training.tradeoff.cost_inputs`); their plans of steps, checked against what each trained, and
the kinds of step timed (:mod:`~fastcore_ops.training.tradeoff.cost_plans`,
:mod:`~fastcore_ops.training.tradeoff.cost_pass`) or read from an earlier pass's ``costs.json`` (``--times``); each
run priced (:mod:`~fastcore_ops.training.tradeoff.pricing`); the report out
(:mod:`~fastcore_ops.training.tradeoff.cost_report`).

    >>> price_runs([Path("reports/laptop")], Path("out"), data=None, subset=None, device="cpu", times=None, rounds=3,
    ...            threads=None, baseline=None)  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Sequence
from pathlib import Path

import torch

from fastcore_ops.cli import refuse
from fastcore_ops.host_memory import keep_freed_memory
from fastcore_ops.kernels import backend
from fastcore_ops.owned_folder import check_claimable
from fastcore_ops.training.assemble import build_trainer
from fastcore_ops.training.compute_threads import use_threads
from fastcore_ops.training.tradeoff.cost_inputs import read_cost_inputs
from fastcore_ops.training.tradeoff.cost_plans import time_records
from fastcore_ops.training.tradeoff.cost_report import CHECK_MD, COSTS_MD, MEASURED, write_cost_report
from fastcore_ops.training.tradeoff.options import claim_out
from fastcore_ops.training.tradeoff.planning import Report
from fastcore_ops.training.tradeoff.pricing import model_runs
from fastcore_ops.training.tradeoff.report import build_report


def price_runs(folders: Sequence[Path], out: Path, *, data: Path | None, subset: int | None, device: str,
               times: Path | None, rounds: int, threads: int | None, baseline: str | None,
               progress: bool = True, assignments: Sequence[str] = (), report: Report = build_report,
               tool: str = "tradeoff") -> None:
    """The cost pass: time every kind of step the runs of ``folders`` took, here (or take the step times of an
    earlier pass's ``times``), and write the reports on modelled times into ``out`` (see the module's doc).

    Every input is checked before any step is timed; ValueError (TypeError, OSError) names what cannot work,
    and nothing is written. ``threads``: PyTorch's threads on a CPU (None: as ``python -m fastcore_ops.training.train``
    chooses), ``rounds``: how many times each window of steps is timed, ``assignments``: the ``--set``
    overrides of runs whose folders no longer hold their configuration (see
    :func:`fastcore_ops.training.tradeoff.trained_config.record_config`), ``report``: what is written on each
    time, modelled and measured (an ablation's: :func:`fastcore_ops.training.ablate.report.ablation_report`),
    ``tool``: the command whose marker ``out`` takes.
    """
    inputs = read_cost_inputs(folders, times=times, baseline=baseline, data=data, subset=subset,
                              assignments=assignments)
    for folder in (out, out / MEASURED):
        check_claimable(folder, tool)
    if backend.INTERPRETING:  # the last check: the suite runs the others under the interpreter
        raise ValueError("Triton's interpreter is on (FASTCORE_OPS_INTERPRET=1 or TRITON_INTERPRET=1): steps timed "
                         "through it mean nothing; unset it to time the steps")
    on = torch.device(device)
    if on.type == "cpu":
        print(use_threads(threads).describe())
        keep_freed_memory()  # as python -m fastcore_ops.training.train does, so the steps run as the runs' did
    build = functools.partial(build_trainer, data=data, out=None, device=on, subset=subset, progress=False,
                              eval_every=0)
    plans, timed = time_records(inputs.table.records, inputs.configs, build, costs=inputs.costs, rounds=rounds,
                                threads=torch.get_num_threads(), progress=progress)
    costs = inputs.costs or timed
    priced = model_runs(inputs.table.records, plans, costs, f"the step times in {times}" if times is not None else
                        "the step times timed here")
    for folder in (out, out / MEASURED):
        claim_out(folder, tool)
    write_cost_report(inputs.table, priced, costs, out, inputs.baseline, timed_here=times is None, report=report)


def cost_command(args: argparse.Namespace, *, baseline: str | None, report: Report = build_report,
                 tool: str = "tradeoff") -> int:
    """``--cost FOLDER...`` of a parsed command line: :func:`price_runs` (``baseline``, ``report`` and ``tool`` as
    it takes them), then where its reports are; the exit code (2 with one ``error:`` line, nothing written, when
    an input cannot work)."""
    try:
        price_runs(args.cost, args.out, data=args.data, subset=args.subset, device=args.device, times=args.times,
                   rounds=args.rounds or 3, threads=args.threads, baseline=baseline,
                   progress=not args.no_progress, assignments=args.assignments, report=report, tool=tool)
    except (ValueError, TypeError, OSError) as error:
        return refuse(error)
    print(f"costs: {args.out / COSTS_MD}; the model against each run: {args.out / CHECK_MD}; reports on modelled "
          f"times: {args.out / 'report.html'}, on measured times: {args.out / MEASURED / 'report.html'}")
    return 0
