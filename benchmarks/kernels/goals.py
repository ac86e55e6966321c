"""``python -m benchmarks.kernels.goals``: each kernel's goals judged on the rows a GPU run wrote.

``python -m benchmarks.kernels --jsonl FILE`` appends one row per kernel and size as it is measured
(``tools/lent_gpu.sh`` keeps them as ``kernels.jsonl``). This reads such files and judges every goal
of each kernel's declaration (:class:`benchmarks.kernels.Goal`) that holds at the row's size twice:
on the eager times (the host's dispatch and launches included) and on the device's own time (the
CUDA-graph replay, or the profiler's kernel durations where a path could not be captured). Beside them, for
each goal of time, the rival's host time over ours (the process's CPU time for one call, where the rows have
it): no bar, it says how much of an eager miss is the host's. Where a size was measured twice, the later row
counts (a retry appended to the same file, or a later file).
It writes ``goals.md`` (a table), ``goals.json`` and ``goals.png`` (each goal's ratio over its bar) to ``--out``.

Example:
    python -m benchmarks.kernels.goals runs/lease/kernels.jsonl --out runs/lease-goals
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from fastcore_ops import cli

# A row's path prefixes whose forward+backward times a goal may compare.
_TIME_SOURCES = ("graph_ms", "kernels_ms")


def build_parser() -> cli.ArgumentParser:
    """The command line of ``python -m benchmarks.kernels.goals``."""
    parser = cli.ArgumentParser(prog="python -m benchmarks.kernels.goals", description=cli.description(__doc__))
    parser.add_argument("rows", type=Path, nargs="+", help="kernels.jsonl files a GPU run wrote, oldest first")
    parser.add_argument("--out", type=cli.claimable_folder("benchmarks"), required=True,
                        help="folder for goals.md, goals.json and goals.png")
    return parser


def read_rows(paths: list[Path]) -> list[dict]:
    """The rows of ``paths`` in order, each checked: a JSON object with the kernel, size, batch and dtype a run
    writes. Raises ValueError naming the file and line of the first that is not."""
    rows = []
    for path in paths:
        try:
            lines = path.read_text().splitlines()
        except (OSError, UnicodeDecodeError) as error:
            raise ValueError(f"{path}: cannot be read ({error}); pass the kernels.jsonl a GPU run wrote") from None
        for number, line in enumerate(lines, 1):
            where = f"{path}, line {number}"
            try:
                row = json.loads(line)
            except ValueError:
                raise ValueError(f"{where}: not a JSON row; pass the kernels.jsonl a GPU run wrote") from None
            if not isinstance(row, dict) or not all(isinstance(row.get(key), str) for key in ("kernel", "size",
                                                                                           "dtype")) \
                    or not isinstance(row.get("batch"), int) or isinstance(row.get("batch"), bool):
                raise ValueError(f"{where}: a row needs its kernel, size, dtype and batch; pass the kernels.jsonl "
                                 "a GPU run wrote")
            rows.append(row)
    if not rows:
        raise ValueError(f"{', '.join(map(str, paths))}: no rows; pass the kernels.jsonl a GPU run wrote")
    return rows


def device_row(row: dict) -> dict:
    """``row`` with each path's forward+backward time replaced by the device's own: the graph replay's, else the
    profiler's kernel durations, else None. A column with neither kind, the modelled bandwidth floor, stays.

        >>> row = device_row({"ours_fwd_bwd_ms": 0.5, "ours_fwd_bwd_graph_ms": 0.1, "ref_fwd_bwd_ms": 2.0,
        ...                   "ref_fwd_bwd_graph_ms": None, "ref_fwd_bwd_kernels_ms": 0.3, "floor_fwd_bwd_ms": 0.05})
        >>> row["ours_fwd_bwd_ms"], row["ref_fwd_bwd_ms"], row["floor_fwd_bwd_ms"]
        (0.1, 0.3, 0.05)
    """
    result = dict(row)
    for key in row:
        stem = key.removesuffix("ms")
        if key.endswith("_fwd_bwd_ms") and any(stem + source in row for source in _TIME_SOURCES):
            result[key] = device_time_ms(row, key.removesuffix("_fwd_bwd_ms"))
    return result


def device_time_ms(row: dict, path: str) -> float | None:
    """Path ``path``'s forward+backward on the device's own time in ``row``: the graph replay's, else the profiler's
    kernel durations, else None.

        >>> device_time_ms({"ref_fwd_bwd_graph_ms": None, "ref_fwd_bwd_kernels_ms": 0.3}, "ref")
        0.3
    """
    return next((time for time in (_number(row.get(f"{path}_fwd_bwd_{source}")) for source in _TIME_SOURCES)
                 if time is not None), None)


def host_row(row: dict) -> dict:
    """``row`` with each path's forward+backward time replaced by the host's own (``*_fwd_bwd_host_ms``: the
    process's CPU time for one call, on a GPU), None where the row has none (the bandwidth floor has no host).

        >>> host_row({"ours_fwd_bwd_ms": 0.5, "ours_fwd_bwd_host_ms": 0.2, "floor_fwd_bwd_ms": 0.05})
        {'ours_fwd_bwd_ms': 0.2, 'ours_fwd_bwd_host_ms': 0.2, 'floor_fwd_bwd_ms': None}
    """
    return {**row, **{key: _number(row.get(key.removesuffix("ms") + "host_ms"))
                      for key in row if key.endswith("_fwd_bwd_ms")}}


def _number(value) -> float | None:
    """A finite positive measurement, else None (a row is untrusted: text, NaN and zero are not times)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        return None
    return float(value)


def judge(rows: list[dict]) -> list[dict]:
    """One verdict per goal that holds at a row's size, the last row of each (kernel, size, dtype) counting."""
    import torch

    from benchmarks.kernels.registry import KERNELS
    from benchmarks.kernels.runner import all_cases

    goals = {spec.name: spec.goals for spec in KERNELS}
    latest = {(row["kernel"], row["size"], row["dtype"]): row for row in rows}
    cases = {}
    verdicts = []
    for (kernel, size, dtype), row in latest.items():
        if kernel not in goals:
            raise ValueError(f"a row of kernel {cli.shown(kernel)}: not a declared kernel "
                             f"({', '.join(goals)}); pass the kernels.jsonl a GPU run wrote")
        key = (row["batch"], dtype)
        if key not in cases:
            torch_dtype = getattr(torch, dtype.removeprefix("torch."), None)
            if not isinstance(torch_dtype, torch.dtype):
                raise ValueError(f"a row of dtype {cli.shown(dtype)}: not a torch dtype; pass the kernels.jsonl "
                                 "a GPU run wrote")
            cases[key] = {(case.kernel, case.size): case
                          for case in all_cases(row["batch"], torch_dtype, torch.device("cuda"), None)}
        case = cases[key].get((kernel, size))
        if case is None:
            raise ValueError(f"a {kernel} row of size {cli.shown(size)}: not a size the benchmark declares at batch "
                             f"{row['batch']}; pass the kernels.jsonl a GPU run wrote")
        on_device = device_row(row)
        for goal in goals[kernel]:
            if not goal.applies_to(case):
                continue
            eager, device = goal.ratio(_numbers(row)), goal.ratio(_numbers(on_device))
            verdicts.append({"kernel": kernel, "size": size, "dtype": dtype, "goal": goal.text,
                             "at_least": goal.at_least, "eager_ratio": eager, "device_ratio": device,
                             "host_ratio": goal.ratio(_numbers(host_row(row))) if goal.metric == "fwd_bwd_ms" else None,
                             "met_eager": None if eager is None else eager >= goal.at_least,
                             "met_on_device": None if device is None else device >= goal.at_least,
                             "device_bound": goal.bound(_numbers(on_device))})
    return verdicts


def _numbers(row: dict) -> dict:
    return {key: _number(value) for key, value in row.items() if key not in ("kernel", "size", "dtype", "device")}


def table(verdicts: list[dict]) -> str:
    """The verdicts as a Markdown table: each ratio is the rival's time (or memory) over ours, and "the bytes
    allow" the most a goal of time can reach on the device (:meth:`benchmarks.kernels.Goal.bound`)."""
    def shown(ratio, met):
        return "-" if ratio is None else f"{ratio:.2f}x {'met' if met else '**missed**'}"

    def allowed(verdict):
        bound = verdict.get("device_bound")
        if bound is None:
            return "-"
        return f"{bound:.2f}x{' (less than asked)' if _beyond_bound(verdict) else ''}"

    def host(verdict):
        ratio = verdict.get("host_ratio")
        return "-" if ratio is None else f"{ratio:.2f}x"

    lines = ["| kernel | size | goal | at least | eager (host included) | the host's own | device | the bytes allow |",
             "|---|---|---|---|---|---|---|---|"]
    for verdict in verdicts:
        lines.append(f"| {verdict['kernel']} | {verdict['size']} | {verdict['goal']} | {verdict['at_least']:.2f}x | "
                     f"{shown(verdict['eager_ratio'], verdict['met_eager'])} | {host(verdict)} | "
                     f"{shown(verdict['device_ratio'], verdict['met_on_device'])} | {allowed(verdict)} |")
    met = sum(verdict["met_on_device"] is True for verdict in verdicts)
    judged = sum(verdict["met_on_device"] is not None for verdict in verdicts)
    beyond = sum(verdict["met_on_device"] is False and _beyond_bound(verdict) for verdict in verdicts)
    return "\n".join(lines) + (f"\n\nOn the device's own time: {met} of {judged} goals met; {beyond} of those "
                               "missed ask more than the bytes allow (the rival's time over ours' bytes at the peak "
                               "bandwidth).\n")


def _beyond_bound(verdict: dict) -> bool:
    """Whether a goal asks more than the bytes allow on the device (its ``device_bound`` under its ``at_least``)."""
    return verdict.get("device_bound") is not None and verdict["device_bound"] < verdict["at_least"]


def figure(verdicts: list[dict], path: Path) -> None:
    """A bar per goal: the ratio measured on the device over the one asked (1 = just met), eager beside it, and a
    tick where the bytes' bound lies (a tick left of 1: no kernel moving ours' bytes can meet it)."""
    from fastcore_ops.training.figures import plt, save_figure

    judged = [verdict for verdict in verdicts if verdict["device_ratio"] is not None]
    labels = [f"{verdict['kernel']} {verdict['size']}: {verdict['goal']}" for verdict in judged]
    device = [verdict["device_ratio"] / verdict["at_least"] for verdict in judged]
    eager = [(verdict["eager_ratio"] or float("nan")) / verdict["at_least"] for verdict in judged]
    fig, ax = plt.subplots(figsize=(11, 0.3 * len(judged) + 1.4))
    rows = range(len(judged))
    ax.barh([row - 0.2 for row in rows], device, height=0.4, label="device's own time",
            color=["tab:green" if value >= 1 else "tab:red" for value in device])
    ax.barh([row + 0.2 for row in rows], eager, height=0.4, label="eager, host included", color="tab:gray")
    bounds = [(verdict.get("device_bound") or float("nan")) / verdict["at_least"] for verdict in judged]
    ax.scatter(bounds, [row - 0.2 for row in rows], marker="|", s=120, color="black",
               label="the most the bytes allow")
    ax.set_yticks(list(rows), labels, fontsize=7)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    ax.invert_yaxis()
    ax.set_xlabel("measured ratio over the goal's (at least 1 meets it; log scale)")
    ax.set_title(f"Goals met on the device's own time: {sum(value >= 1 for value in device)} of {len(judged)}")
    ax.legend(loc="lower right", fontsize=8)
    save_figure(fig, path, tight=True)


@cli.command(build_parser)
def main(args: argparse.Namespace) -> int:
    from fastcore_ops.owned_folder import claim_folder

    try:
        verdicts = judge(read_rows(args.rows))
    except cli.REFUSALS as error:
        return cli.refuse(error)
    text = table(verdicts)
    print(text, end="")
    claim_folder(args.out, "benchmarks")
    (args.out / "goals.md").write_text(text)
    (args.out / "goals.json").write_text(json.dumps(verdicts, indent=2) + "\n")
    figure(verdicts, args.out / "goals.png")
    print(f"Wrote {args.out / 'goals.md'}, {args.out / 'goals.json'} and {args.out / 'goals.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
