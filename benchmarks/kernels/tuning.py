"""The tuning of ``python -m benchmarks.kernels.retune`` (its module says what it does), imported once its command
line is parsed.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
from pathlib import Path
from unittest import mock

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from tqdm import tqdm

from fastcore_ops import cli
from fastcore_ops.kernels import backend, rivals
from fastcore_ops.kernels.launches import LaunchRecorder, run_backward_node

from . import forward_backward
from .registry import KERNELS


def check_can_tune(out: Path) -> dict:
    """The table at ``out`` to update (empty if absent); ValueError where this process cannot tune, or ``out``
    cannot be updated: before anything runs or is written."""
    if not torch.cuda.is_available():
        raise ValueError("retuning times the kernels on a GPU, and this machine has no CUDA device; "
                         "the table is left as it is")
    if backend.INTERPRETING:
        raise ValueError("Triton's interpreter is on (FASTCORE_OPS_INTERPRET or TRITON_INTERPRET): it cannot time "
                         "configs; unset both")
    if backend.AUTOTUNE_MODE == "first":
        raise ValueError(f"{backend.AUTOTUNE_VARIABLE}=0 keeps each kernel's first config alone; unset it")
    if out.is_dir() or not out.parent.is_dir():
        raise ValueError(f"--out {out}: must be a file in an existing folder")
    return backend.load_tuned_configs(out) if out.exists() else {}


def tune_kernels(names: list[str], batch: int, dtypes: list[torch.dtype], device: torch.device,
                 kept: dict[str, dict[tuple, object]]) -> dict[str, dict[str, dict]]:
    """The benchmark cases of the kernels ``names`` run once forward and backward with tuning forced on; the
    configs chosen, by autotuner and key. ``kept`` (:func:`kept_configs`): configs each autotuner starts with, at
    keys it then does not time."""
    for name, tuner in backend.TUNERS.items():
        tuner.cache.clear()
        tuner.cache.update(kept.get(name, {}))
        tuner.cache_results = False  # measure here, not read back what Triton's cache folder kept
    cases = [case for spec in KERNELS if spec.name in names for dtype in dtypes
             for case in spec.benchmark_cases(batch, dtype, device, False)]
    with backend.tuning(), rivals.kernels_always():
        for case in tqdm(cases, desc="tuning", leave=False):
            try:
                forward_backward(case.ours, case.make_inputs(), torch.randn_like)
                torch.cuda.synchronize()
            except torch.OutOfMemoryError:  # its keys stay out of the table, which then runs their first config
                print(f"skipped {case.kernel} {case.size}: out of memory", file=sys.stderr)
            torch.cuda.empty_cache()
    return backend.chosen_configs()


def kept_configs(table: dict, path: Path) -> dict[str, dict[tuple, object]]:
    """The configs ``table`` (read from ``path``) holds, by autotuner and by the key its cache files them under: the
    tuple the table holds as text. Raises ValueError, naming the file, for a key that is not such a tuple."""
    kept = {}
    for name, tuner in backend.TUNERS.items():
        kept[name] = {}
        for key, config in backend.frozen_choices(name, tuner.configs, table, path).items():
            try:
                values = ast.literal_eval(key)  # literals only: a key is text from an untrusted file
            except (ValueError, SyntaxError, RecursionError, MemoryError):
                values = None
            if not isinstance(values, tuple):
                raise ValueError(f"{path}: {name}: key {cli.shown(key)} is not a tuning key's tuple; rewrite the "
                                 "table with python -m benchmarks.kernels.retune, or restore it with git")
            kept[name][values] = config
    return kept


def keys_met(names: list[str], batch: int, dtypes: list[torch.dtype]) -> dict[str, dict[str, list[str]]]:
    """The tuning keys the benchmark cases of the kernels ``names`` meet, by kernel and autotuner, found without a
    GPU: each case's forward and backward run on fake CUDA tensors (shapes, strides and dtypes, no data) down
    the Triton path, every autotuner choosing its config as on a GPU and the launches below it stubbed."""
    from triton.runtime.jit import JITFunction

    met = {}
    with mock.patch.object(JITFunction, "run", lambda *args, **kwargs: None), rivals.kernels_always():
        for spec in KERNELS:
            if spec.name not in names:
                continue
            for tuner in backend.TUNERS.values():
                tuner.cache.clear()
            for dtype in dtypes:
                with FakeTensorMode():
                    for case in spec.benchmark_cases(batch, dtype, torch.device("cuda"), False):
                        inputs = case.make_inputs()
                        with LaunchRecorder():  # runs our ops' code on fake tensors, as their fakes would not
                            out = case.ours(*inputs)
                            run_backward_node(out, torch.ones_like(out))
            met[spec.name] = {name: [str(key) for key in tuner.cache]
                              for name, tuner in backend.TUNERS.items() if tuner.cache}
    return met


def check_can_list(out: Path) -> dict:
    """The table at ``out`` whose missing keys ``--missing`` lists; ValueError where this process cannot list them."""
    if backend.INTERPRETING:
        raise ValueError("Triton's interpreter is on (FASTCORE_OPS_INTERPRET or TRITON_INTERPRET): its kernels have "
                         "one config and no tuning key; unset both")
    if backend.AUTOTUNE_MODE != "table":
        raise ValueError(f"{backend.AUTOTUNE_VARIABLE} is set: the keys are found as the table is read; unset it")
    return backend.load_tuned_configs(out)


def list_missing(table: dict, met: dict[str, dict[str, list[str]]]) -> list[str]:
    """What ``--missing`` prints: each kernel's keys met and those the table lacks, then the kernels to retune."""
    lines, retune = [], []
    for kernel, tuners in met.items():
        for tuner, keys in tuners.items():
            missing = [key for key in keys if key not in table.get(tuner, {})]
            lines.append(f"{kernel}: {tuner}: {len(keys) - len(missing)} of {len(keys)} keys in the table")
            lines += [f"    missing {key}" for key in missing]
            if missing and kernel not in retune:
                retune.append(kernel)
    lines.append(f"RETUNE_KERNELS={','.join(retune)}" if retune else "every key met is in the table")
    return lines


def write_table(table: dict, out: Path) -> None:
    """``table`` as JSON at ``out``, whole or not at all (written beside it, then moved over it)."""
    partial = out.with_name(out.name + ".partial")
    partial.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    os.replace(partial, out)


def run(args: argparse.Namespace) -> int:
    """Tune the kernels ``args`` (``python -m benchmarks.kernels.retune``'s) names and update the table in ``--out``;
    the command's exit status."""
    try:
        known = [spec.name for spec in KERNELS]
        names = cli.check_names("--kernels", args.kernels, known, "kernel") if args.kernels else known
        dtypes = [getattr(torch, name) for name in args.dtypes]
        table = check_can_list(args.out) if args.missing else check_can_tune(args.out)
    except cli.REFUSALS as error:
        return cli.refuse(error)
    if args.missing:
        print("\n".join(list_missing(table, keys_met(names, args.batch_size, dtypes))))
        return 0
    try:
        kept = kept_configs(table, args.out) if args.only_new else {}
    except ValueError as error:
        return cli.refuse(error)
    chosen = tune_kernels(names, args.batch_size, dtypes, torch.device("cuda"), kept)
    if args.only_new:  # the kept keys came back as they went in
        chosen = {name: {key: entry for key, entry in entries.items() if key not in table.get(name, {})}
                  for name, entries in chosen.items()}
        chosen = {name: entries for name, entries in chosen.items() if entries}
    for tuner_name, entries in chosen.items():
        table.setdefault(tuner_name, {}).update(entries)
    write_table(table, args.out)
    keys = sum(len(entries) for entries in chosen.values())
    only = "; only keys the table lacked" if args.only_new else ""
    print(f"Wrote {args.out}: {keys} keys of {len(chosen)} autotuned kernels tuned on {torch.cuda.get_device_name()} "
          f"(batch {args.batch_size}, {','.join(args.dtypes)}{only})")
    return 0

