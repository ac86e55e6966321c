"""The workloads of ``python -m benchmarks.surgery`` and their measurement, imported once its command line is
parsed (:mod:`benchmarks.surgery` says what it measures).
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import time
import warnings
from dataclasses import dataclass
from typing import Callable

import torch
import torchvision
from torch import nn
from torch.utils.flop_counter import FlopCounterMode
from tqdm import tqdm

from fastcore_ops import apply_surgery, list_surgeries
from fastcore_ops.owned_folder import claim_folder
from fastcore_ops.training.methods.registry import methods_of
from fastcore_ops.training.tasks.classification import ImageClassification
from fastcore_ops.training.tasks.language import CausalLanguageModeling

from .timing import device_name


@dataclass
class Workload:
    """A model family, the surgeries that apply to it, and one training step's inputs and loss."""

    name: str
    build: Callable[[], nn.Module]
    surgeries: list[str]
    batch: Callable[[torch.device], tuple]
    loss: Callable[[nn.Module, tuple], torch.Tensor]
    unit: str  # what the throughput counts


def _surgeries_for(task) -> list[str]:
    """The surgeries the method registry declares for ``task`` (a task class), in the order they apply."""
    return [method.name for method in methods_of("surgery") if method.applies_to(task)]


def resnet_workload(batch_size: int, image_size: int, name: str = "resnet50") -> Workload:
    """A torchvision ResNet (``name``: resnet50, resnet18, ...) on random ``image_size`` images, 1000 classes."""
    def batch(device):
        x = torch.randn(batch_size, 3, image_size, image_size, device=device)
        return x.contiguous(memory_format=torch.channels_last), torch.randint(0, 1000, (batch_size,), device=device)

    return Workload(
        name, getattr(torchvision.models, name), _surgeries_for(ImageClassification), batch,
        lambda model, b: nn.functional.cross_entropy(model(b[0]), b[1]), "images/s",
    )


def gpt2_workload(batch_size: int, sequence: int, name: str = "gpt2-small", **config) -> Workload:
    """GPT-2 from transformers (small, or ``config``'s GPT2Config fields) on random token sequences."""
    from transformers import GPT2Config, GPT2LMHeadModel

    model_config = GPT2Config(**config)

    def batch(device):
        return (torch.randint(0, model_config.vocab_size, (batch_size, sequence), device=device),)

    def loss(model, b):
        return model(input_ids=b[0], labels=b[0]).loss

    return Workload(name, lambda: GPT2LMHeadModel(model_config), _surgeries_for(CausalLanguageModeling), batch, loss,
                    "tokens/s")


def _step_flops(model: nn.Module, loss_fn, batch) -> int:
    counter = FlopCounterMode(display=False)
    with counter:
        loss_fn(model, batch).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops()


def _throughput(model, loss_fn, batch, items: int, device, steps: int, autocast: torch.dtype | None) -> float:
    """Items per second of the median training step, after two warm-up steps.

    The median, not the mean: on a shared CPU one slow step (another process, the allocator
    growing) would otherwise decide the row.
    """
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)

    def step() -> float:
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=autocast, enabled=autocast is not None):
            loss = loss_fn(model, batch)
        loss.backward()
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter() - start

    step(), step()  # warm-up: allocations, autotuning, lazy initialisation, thread pools
    return items / statistics.median(step() for _ in range(steps))


def measure(workload: Workload, surgery: str | None, device, steps: int, autocast: torch.dtype | None = None) -> dict:
    """``workload``'s model after ``surgery`` (None: as built): size, FLOPs of a step and training throughput,
    under ``autocast`` to that dtype when given."""
    torch.manual_seed(0)
    model = workload.build().to(device)
    if surgery is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            apply_surgery(model, [surgery])
    model.train()
    batch = workload.batch(device)
    items = batch[0].shape[0] if workload.unit == "images/s" else batch[0].numel()
    return {
        "model": workload.name,
        "surgery": surgery or "(none)",
        "parameters_M": sum(p.numel() for p in model.parameters()) / 1e6,
        "step_GFLOPs": _step_flops(model, workload.loss, batch) / 1e9,
        "throughput": _throughput(model, workload.loss, batch, items, device, steps, autocast),
        "unit": workload.unit,
    }


def run(args: argparse.Namespace, chosen: list[str]) -> None:
    """Measure the ``chosen`` models before and after each surgery as ``python -m benchmarks.surgery`` was asked
    to (``args``), print the table and write it to ``--out``."""
    device = torch.device(args.device)
    gpu = device.type == "cuda"
    workloads = {
        "resnet50": lambda: resnet_workload(args.batch_size or (64 if gpu else 8),
                                            args.image_size or (224 if gpu else 128)),
        "gpt2-small": lambda: gpt2_workload(args.batch_size or (8 if gpu else 2),
                                            args.sequence or (1024 if gpu else 256)),
    }
    available = {s["name"] for s in list_surgeries()}
    runs = [(workloads[name](), surgery) for name in chosen for surgery in [None] + workloads[name]().surgeries
            if surgery is None or surgery in available]
    print(f"Device: {device_name(device)}")
    rows = [measure(w, s, device, args.steps or (20 if gpu else 5)) for w, s in tqdm(runs, desc="surgeries", leave=False)]
    baseline = {r["model"]: r for r in rows if r["surgery"] == "(none)"}
    for row in rows:
        row["relative_throughput"] = row["throughput"] / baseline[row["model"]]["throughput"]

    header = f"{'model':<11} {'surgery':<17} {'params (M)':>10} {'GFLOPs/step':>12} {'throughput':>16} {'vs none':>8}"
    print(header + "\n" + "-" * len(header))
    for r in rows:
        print(f"{r['model']:<11} {r['surgery']:<17} {r['parameters_M']:>10.2f} {r['step_GFLOPs']:>12.1f} "
              f"{r['throughput']:>8.1f} {r['unit']:<8}{r['relative_throughput']:>7.2f}x")
    claim_folder(args.out, "benchmarks")
    (args.out / "surgery.json").write_text(json.dumps({"device": device_name(device), "rows": rows}, indent=2))
    with open(args.out / "surgery.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"Wrote {args.out / 'surgery.csv'} and {args.out / 'surgery.json'}")
