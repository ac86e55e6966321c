"""``python -m benchmarks.gpu_check --out DIR``: what this toolkit does on this GPU, in one command.

Run from the repository root (``PYTHONPATH=.``) on a machine with CUDA, it checks and times
everything GPU-specific, part by part (``benchmarks/gpu_check/parts.py`` lists them), each in a
process of its own and within its time budget: a part that fails or overruns is recorded with
its error and the rest still run. It writes ``DIR/gpu_check.md`` and ``.json`` and the kernels'
plot, every number beside the GPU, driver, torch and Triton it came from.

Without CUDA (or with ``--small``) it runs its small mode: Triton's interpreter on the CPU, tiny
sizes, under a minute on two idle cores. Its figures say nothing about a GPU; it shows the check
runs. There a part may take longer than its budget (a slow CPU, a busy machine): the report says so,
and only a part ten times over its budget is stopped, as hung.

The exit status is in ``EXIT_STATUS``, which ``--help`` prints.
"""

from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.gpu_check.parts import PARTS, SMALL_MODE_HEADROOM, Mode, Part
from fastcore_ops import cli
from fastcore_ops.owned_folder import check_claimable, claim_folder

# torch (and matplotlib, for the plot) are imported where they are used, once the command line parsed.

TOOL = "benchmarks.gpu_check"
EXIT_STATUS = ("Exit status: 0 when every part ran to its end; 1 when one did not (it raised, crashed, or was stopped "
               "at its time limit: the report names it, with the rows it wrote); 2 for a refused command line.")
PARTS_FOLDER = "parts"  # DIR/parts/<part>.json: each part's own record, as it wrote it


def environment(mode: Mode) -> dict[str, str]:
    """The hardware and software every number of the check came from."""
    import torch

    from fastcore_ops.training.precision import cpu_model

    found = {"python": platform.python_version(), "torch": torch.__version__, "triton": _triton_version(),
             "cpu": cpu_model() or platform.machine(), "cores": str(os.cpu_count())}
    if mode.small:
        return {"gpu": "none (small mode: Triton's interpreter on the CPU)", **found}
    return {"gpu": torch.cuda.get_device_name(), "driver": _driver_version(), "cuda": str(torch.version.cuda),
            **found}


def _triton_version() -> str:
    try:
        import triton
    except ImportError:
        return "not installed"
    return triton.__version__


def _driver_version() -> str:
    try:
        answer = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown (nvidia-smi did not answer)"
    return answer.stdout.strip().splitlines()[0] if answer.returncode == 0 and answer.stdout.strip() else "unknown"


def run_part(part: Part, mode: Mode, folder: Path) -> dict:
    """Run ``part`` in its own process within its time limit; its record with ``status`` (ok, failed, over budget:
    stopped at its limit), ``seconds``, ``past_budget`` (it took longer than its budget) and, when it failed or
    was stopped, ``error``."""
    path = folder / f"{part.name}.json"
    command = [sys.executable, "-m", "benchmarks.gpu_check.part", part.module, str(path)]
    command += ["--small"] if mode.small else []
    interpret = mode.small and part.interpreted
    environment_variables = dict(os.environ, FASTCORE_OPS_INTERPRET="1" if interpret else "0",
                                 PYTHONPATH=os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")])))
    if not interpret:
        environment_variables.pop("TRITON_INTERPRET", None)
    started = time.perf_counter()
    process = subprocess.Popen(command, env=environment_variables, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)  # its own group: a stop takes its children too
    try:
        _, stderr = process.communicate(timeout=part.limit(mode))
        status = "ok" if process.returncode == 0 else "failed"
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        _, stderr = process.communicate()
        status = "over budget"
    except BaseException:  # the check itself stopped (Ctrl-C): the part, in a session of its own, stops too
        os.killpg(process.pid, signal.SIGKILL)
        raise
    seconds = time.perf_counter() - started
    record = _read_record(path)
    if status == "failed" and "error" not in record:  # it died before writing its error (a crash, a signal)
        record["error"] = f"exit code {process.returncode}: {stderr.strip().splitlines()[-1] if stderr.strip() else ''}"
    if status == "over budget":
        rows = len(record["rows"])
        record["error"] = f"stopped at its limit of {part.limit(mode):.0f} s after {rows} row{'s' * (rows != 1)}"
    return {"name": part.name, "title": part.title, "status": status, "seconds": seconds,
            "budget_s": part.budget(mode), "past_budget": seconds > part.budget(mode), **record}


def _read_record(path: Path) -> dict:
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return {"rows": [], "notes": []}
    return {"rows": record.get("rows", []), "notes": record.get("notes", []),
            **{key: record[key] for key in ("error", "traceback") if key in record}}


def _cell(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "**no**"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
    return "-" if value is None else str(value)


def part_markdown(index: int, result: dict) -> str:
    """One part's section: its title, status and time, its table, its notes and, when it failed, its error."""
    past = " (past its budget: a slower or busier machine than the budget's two idle cores)" \
        if result["past_budget"] and result["status"] == "ok" else ""
    lines = [f"## {index}. {result['title']}", "",
             f"**{result['status']}** in {result['seconds']:.1f} s (budget {result['budget_s']:.0f} s){past}"
             + (f": {result['error']}" if "error" in result else ""), ""]
    rows = result["rows"]
    if rows:
        columns = list(dict.fromkeys(key for row in rows for key in row))
        lines += ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        lines += ["| " + " | ".join(_cell(row.get(column)) for column in columns) + " |" for row in rows]
        lines.append("")
    lines += [*result["notes"], ""] if result["notes"] else []
    return "\n".join(lines)


def write_report(out: Path, mode: Mode, found: dict[str, str], results: list[dict]) -> list[Path]:
    """Write gpu_check.json, gpu_check.md and, when the kernels part has rows, kernels.png; the paths written."""
    from benchmarks.gpu_check.figure import plot_kernel_speedups  # matplotlib: only to write the report

    (out / "gpu_check.json").write_text(json.dumps({"mode": "small" if mode.small else "gpu", "environment": found,
                                                    "parts": results}, indent=1) + "\n")
    header = ", ".join(f"{key} {value}" for key, value in found.items())
    sections = [part_markdown(index, result) for index, result in enumerate(results, 1)]
    (out / "gpu_check.md").write_text(f"# GPU check\n\n{header}\n\n" + "\n".join(sections))
    written = [out / "gpu_check.json", out / "gpu_check.md"]
    kernel_rows = [row for result in results if result["name"] == "kernels" for row in result["rows"]
                   if "fwd_bwd_speedup" in row]  # not the cases that ran out of memory
    if kernel_rows:
        title = ("small mode: Triton's interpreter on the CPU, not GPU figures" if mode.small
                 else f"{found['gpu']}, torch {found['torch']}, triton {found['triton']}")
        plot_kernel_speedups(kernel_rows, title, out / "kernels.png")
        written.append(out / "kernels.png")
    return written


def build_parser() -> cli.ArgumentParser:
    """The command line of ``python -m benchmarks.gpu_check``."""
    parser = cli.ArgumentParser(prog="python -m benchmarks.gpu_check", description=cli.description(__doc__),
                                epilog=EXIT_STATUS)
    parser.add_argument("--out", type=Path, required=True, help="folder for gpu_check.md, .json and the plots")
    parser.add_argument("--small", action="store_true",
                        help="the small mode even where CUDA is present (the default without CUDA)")
    parser.add_argument("--parts",
                        help=f"comma-separated parts to run (default: all): {', '.join(p.name for p in PARTS)}")
    return parser


def parse_args(argv: list[str] | None):
    return build_parser().parse_args(argv)


def choose_parts(text: str | None) -> list[Part]:
    """The parts named in ``text`` (all when None), in the check's order; ValueError naming an unknown one."""
    if text is None:
        return list(PARTS)
    names = cli.check_names("--parts", text, [part.name for part in PARTS], "part")
    return [part for part in PARTS if part.name in names]


def main(argv: list[str] | None = None, parts: list[Part] | None = None) -> int:
    """Run the check; 0 when every part ran to its end, 1 when one failed or was stopped at its limit (the module
    docstring). ``parts`` replaces --parts."""
    try:
        args = parse_args(argv)
        chosen = parts if parts is not None else choose_parts(args.parts)
        check_claimable(args.out, TOOL)
    except cli.REFUSALS as error:
        return cli.refuse(error)
    import torch  # once the command line parsed

    mode = Mode(small=args.small or not torch.cuda.is_available())
    if mode.small:
        why = "--small" if args.small else "no CUDA here"
        print(f"gpu_check: small mode ({why}): Triton's interpreter on the CPU, tiny sizes; its figures show the "
              f"check runs, not what a GPU does")
    else:
        print(f"gpu_check on {torch.cuda.get_device_name()}: compiled kernels, full sizes")
    total = sum(part.budget(mode) for part in chosen)
    at_most = f"{total:.0f} s at most" if not mode.small else \
        f"within {total:.0f} s on two idle cores; a part is stopped only at {SMALL_MODE_HEADROOM}x its budget, as hung"
    print(f"plan ({at_most}): " + ", ".join(f"{part.name} {part.budget(mode):.0f} s" for part in chosen))
    claim_folder(args.out, TOOL)
    (args.out / PARTS_FOLDER).mkdir(exist_ok=True)
    found = environment(mode)
    results = []
    for part in chosen:
        result = run_part(part, mode, args.out / PARTS_FOLDER)
        results.append(result)
        print(f"  {part.name}: {result['status']} in {result['seconds']:.1f} s"
              + (f" ({result['error']})" if "error" in result else ""))
    written = write_report(args.out, mode, found, results)
    print(f"wrote {', '.join(map(str, written))}")
    return 0 if all(result["status"] == "ok" for result in results) else 1


if __name__ == "__main__":
    sys.exit(main())
