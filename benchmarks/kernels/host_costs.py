"""The measurements of ``python -m benchmarks.kernels.host_side`` (its module says what each is), imported once its
command line is parsed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from unittest import mock

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from fastcore_ops import cli
from fastcore_ops.kernels import backend, rivals
from fastcore_ops.kernels.fast_launch import KnownKeyLaunch
from fastcore_ops.kernels.launches import LaunchRecorder, Phase, run_backward_node
from fastcore_ops.owned_folder import claim_folder
from fastcore_ops.training.compute_threads import torch_threads
from fastcore_ops.training.precision import cpu_model

from . import KernelSpec, forward_backward
from .fake_driver import Launch, launching_nothing
from .registry import KERNELS

HOST_TIME_GOAL = 1.2  # ours / the rival's, at most (issue 69)


@contextlib.contextmanager
def triton_path():
    """CPU tensors take the Triton path too (as under the interpreter), so their host side is the GPU's."""
    with mock.patch.object(backend, "use_triton", lambda *tensors: True), rivals.kernels_always():
        yield


@rivals.kernels_always()  # the kernel's launches, whatever the table of faster rivals says of this GPU
def launches_on_fake_gpu(spec: KernelSpec, dtype: torch.dtype = torch.bfloat16) -> dict[str, Phase]:
    """The forward's and the backward's phases of ``spec`` on fake CUDA tensors at a training step's size."""
    with FakeTensorMode():
        inputs = spec.inputs("cuda", dtype, False)
        with LaunchRecorder(stub_triton=True) as recorder:
            with recorder.phase("forward"):
                out = spec.ours(*inputs)
            grad = torch.ones_like(out)
            with recorder.phase("backward"):
                run_backward_node(out, grad)
    return recorder.phases


def zero_fills_through_autograd(spec: KernelSpec) -> dict[str, Phase]:
    """The forward's and the backward's phases of ``spec`` on tiny CPU tensors, backward through the engine."""
    inputs = spec.inputs("cpu", torch.float32, True)
    with triton_path(), LaunchRecorder(stub_triton=True) as recorder:
        with recorder.phase("forward"):
            out = spec.ours(*inputs)
        grad = torch.ones_like(out)
        with recorder.phase("backward"):
            out.backward(grad)
    return recorder.phases


def _least_host_times_us(inputs: tuple, sides: dict, rounds: int, calls: int) -> dict[str, float]:
    """The least host time of one forward+backward of each side, in microseconds: ``sides`` maps a name to the
    function to call and the context it is timed in (entered outside the timed calls)."""
    best = dict.fromkeys(sides, float("inf"))
    # One compute thread: the host's own work is single-threaded, and a thread spinning at an OpenMP barrier
    # for a preempted partner would count as this one's time.
    with torch_threads(1):
        for function, context in sides.values():  # warm: first calls build caches (and compile, on a fake GPU)
            with context():
                for _ in range(calls):
                    forward_backward(function, inputs)
        for _ in range(rounds):  # in turn, so that a busy spell hits every side
            for name, (function, context) in sides.items():
                with context():
                    # This thread's CPU time, not the wall clock's: the spells other processes hold the core
                    # count on no side, so a busy machine measures what an idle one does.
                    start = time.thread_time()
                    for _ in range(calls):
                        forward_backward(function, inputs)
                    best[name] = min(best[name], (time.thread_time() - start) / calls * 1e6)
    return best


def host_times_us(spec: KernelSpec, rounds: int = 15, calls: int = 20) -> tuple[float, float]:
    """The least host time of one forward+backward, ours and the rival's, in microseconds, Triton's launches
    stubbed (see the module)."""
    inputs = spec.inputs("cpu", torch.float32, True)
    with triton_path(), LaunchRecorder(stub_triton=True).triton_only():
        times = _least_host_times_us(inputs, {"ours": (spec.ours, contextlib.nullcontext),
                                              "rival": (spec.rival, contextlib.nullcontext)}, rounds, calls)
    return times["ours"], times["rival"]


def _through_the_autotuner():
    """Every autotuned launch through Triton's ``Autotuner.run``, as before KnownKeyLaunch."""
    return mock.patch.object(KnownKeyLaunch, "known_config", lambda self, args, kwargs: None)


def _as_compared(launch: Launch) -> tuple:
    """A launch with each tensor argument as its dtype, shape and strides (a call's outputs are new tensors)."""
    arguments = tuple((a.dtype, tuple(a.shape), a.stride()) if isinstance(a, torch.Tensor) else a
                      for a in launch.arguments)
    return launch.kernel, launch.binary, launch.grid, arguments


def launch_paths(spec: KernelSpec) -> dict:
    """Our forward+backward's launches with Triton's launch path run up to the driver, a second time (every key
    met): whether they are ``same_launches`` as with every autotuned launch through ``Autotuner.run`` (the same
    kernels, compiled binaries, grids and arguments), and ``autotuner_runs``, how many of them went through it
    (0: each found its config without it). The interpreter must be off."""
    from triton.runtime.autotuner import Autotuner

    inputs = spec.inputs("cpu", torch.float32, True)
    with triton_path(), launching_nothing() as launches:
        forward_backward(spec.ours, inputs)  # the first call meets the keys
        launches.clear()
        with mock.patch.object(Autotuner, "run", autospec=True, side_effect=Autotuner.run) as autotuner_run:
            forward_backward(spec.ours, inputs)
        known_keys = [_as_compared(launch) for launch in launches]
        launches.clear()
        with _through_the_autotuner():
            forward_backward(spec.ours, inputs)
        through_autotuner = [_as_compared(launch) for launch in launches]
    return {"same_launches": known_keys == through_autotuner and bool(known_keys),
            "autotuner_runs": autotuner_run.call_count}


def launch_path_times_us(spec: KernelSpec, rounds: int = 15, calls: int = 20) -> dict[str, float]:
    """The least host time of our forward+backward with Triton's launch path run up to the driver
    (benchmarks.kernels.fake_driver), in microseconds: ``ours`` as the kernels launch, ``autotuner`` with every
    autotuned launch through Triton's ``Autotuner.run``. The interpreter must be off."""
    inputs = spec.inputs("cpu", torch.float32, True)
    with triton_path(), launching_nothing(record=False):
        return _least_host_times_us(inputs, {"ours": (spec.ours, contextlib.nullcontext),
                                             "autotuner": (spec.ours, _through_the_autotuner)}, rounds, calls)


def row(spec: KernelSpec) -> dict:
    """One kernel's line of the report."""
    gpu = launches_on_fake_gpu(spec)
    cpu = zero_fills_through_autograd(spec)
    ours_us, rival_us = host_times_us(spec)
    # Triton's launch path runs only compiled: under the interpreter (the test suite) these are left out.
    launch_path = {} if backend.INTERPRETING else {**launch_path_times_us(spec), **launch_paths(spec)}
    return {
        "kernel": spec.name,
        "forward_launches": gpu["forward"].launches, "forward_budget": spec.forward_launches,
        "backward_launches": gpu["backward"].launches, "backward_budget": spec.backward_launches,
        "host_waits": gpu["forward"].host_waits + gpu["backward"].host_waits,
        "host_copies": gpu["forward"].host_copies + gpu["backward"].host_copies,
        "zero_fills": cpu["forward"].zero_fills + cpu["backward"].zero_fills,
        "ours_host_us": ours_us, "rival_host_us": rival_us, "host_ratio": ours_us / rival_us,
        "triton_launches": len(gpu["forward"].triton_launches) + len(gpu["backward"].triton_launches),
        "ours_launch_path_us": launch_path.get("ours"), "autotuner_launch_path_us": launch_path.get("autotuner"),
        "same_launches": launch_path.get("same_launches"), "autotuner_runs": launch_path.get("autotuner_runs"),
    }


def markdown(rows: list[dict], machine: str) -> str:
    lines = [
        f"# The kernels' host side ({machine})",
        "",
        "Launches on fake CUDA tensors at a training step's size (bf16), Triton stubbed; zero-fills through "
        "autograd's engine on CPU tensors; host time of a forward+backward on tiny CPU tensors, the least of "
        f"15 rounds of 20 calls, ours against the PyTorch op a user would run (goal: at most {HOST_TIME_GOAL}x).",
        "",
        "| kernel | forward launches (budget) | backward launches (budget) | host waits | host copies | zero-fills "
        "| ours µs | rival µs | ours / rival |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['kernel']} | {len(r['forward_launches'])} ({r['forward_budget']}) "
            f"| {len(r['backward_launches'])} ({r['backward_budget']}) | {len(r['host_waits'])} "
            f"| {len(r['host_copies'])} | {len(r['zero_fills'])} | {r['ours_host_us']:.1f} | {r['rival_host_us']:.1f} "
            f"| {r['host_ratio']:.2f} |")
    if rows and rows[0]["ours_launch_path_us"] is not None:
        lines += [
            "", "With Triton's launch path run up to the driver (benchmarks.kernels.fake_driver: compiled for an H100, "
            "nothing launched), the least of 15 rounds of 20 calls, our forward+backward as the kernels launch "
            "(KnownKeyLaunch: at a key its autotuner has met, the JIT function is launched with the cached config) "
            "and with every autotuned launch through Triton's Autotuner.run:", "",
            "| kernel | Triton launches | ours µs | through Autotuner.run µs | saved a launch µs "
            "| ours, launches stubbed µs | same launches | through Autotuner.run, known keys |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            saved = (r["autotuner_launch_path_us"] - r["ours_launch_path_us"]) / r["triton_launches"]
            lines.append(f"| {r['kernel']} | {r['triton_launches']} | {r['ours_launch_path_us']:.1f} | "
                         f"{r['autotuner_launch_path_us']:.1f} | {saved:.1f} | {r['ours_host_us']:.1f} | "
                         f"{'yes' if r['same_launches'] else '**no**'} | {r['autotuner_runs']} |")
    lines += ["", "Launches, in order:", ""]
    lines += [f"- {r['kernel']}: forward {', '.join(r['forward_launches'])}; "
              f"backward {', '.join(r['backward_launches'])}" for r in rows]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    """Measure the kernels ``args`` (``python -m benchmarks.kernels.host_side``'s) names, print the table and write
    it to ``--out``; the command's exit status."""
    try:
        known = {spec.name: spec for spec in KERNELS}
        names = cli.check_names("--kernels", args.kernels, known, "kernel") if args.kernels else list(known)
    except ValueError as error:
        return cli.refuse(error)
    rows = []
    for name in names:
        rows.append(row(known[name]))
        print(f"{name}: host {rows[-1]['host_ratio']:.2f}x the rival's", flush=True)
    triton_version = f", Triton {backend.triton.__version__}" if backend.TRITON_AVAILABLE else ""
    machine = f"{cpu_model() or 'CPU'}, {torch.get_num_threads()} threads, torch {torch.__version__}{triton_version}"
    claim_folder(args.out, "benchmarks")
    (args.out / "host_side.json").write_text(json.dumps({"machine": machine, "rows": rows}, indent=2))
    (args.out / "host_side.md").write_text(markdown(rows, machine))
    print(markdown(rows, machine))
    return 0
