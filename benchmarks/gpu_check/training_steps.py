"""Part 5: the recipes' training steps on synthetic batches: ResNet-50 baseline against Mild, GPT against GPT+ALiBi.

Each recipe's model as the trainer builds it (its surgeries, its loss, its optimizer, its
precision) takes training steps on random batches of its own batch size and final image size
or sequence length: the ALiBi kernel against SDPA with learned positions, the Mild surgeries
against none. Step methods (EMA, SAM, ...) and the loader are left out: this is the step the
GPU runs. In small mode the same recipes run at tiny sizes on the CPU.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import replace

import torch

from benchmarks.gpu_check.parts import Mode, Recorder
from fastcore_ops.training.config import TrainConfig
from fastcore_ops.training.methods.library import apply_surgery_methods
from fastcore_ops.training.methods.registry import IMAGES, plan_methods
from fastcore_ops.training.models import build_model
from fastcore_ops.training.models.language import build_language_model, logits_of
from fastcore_ops.training.optim import build_optimizer
from fastcore_ops.training.precision import choose_precision
from fastcore_ops.training.recipes import get_recipe
from fastcore_ops.training.tasks.classification import loss_function
from fastcore_ops.training.tasks.registry import task_named

PAIRS = (("resnet50_baseline", "resnet50_mild"), ("gpt_baseline", "gpt_alibi"))
CLASSES, VOCABULARY = 1000, 50257  # ImageNet's classes; GPT-2's tokens


def _image_step(config: TrainConfig, device: torch.device, small: bool) -> tuple[Callable[[], torch.Tensor], int]:
    batch, size = (2, 32) if small else (config.data.batch_size, config.data.train_size)
    model, plan = build_model(config.model.name, CLASSES), plan_methods(config)
    apply_surgery_methods(model, plan.surgeries)
    model.to(device).train()
    memory_format = torch.channels_last if plan.loader_switches.get("channels_last") else torch.contiguous_format
    images = torch.randn(batch, 3, size, size, device=device).contiguous(memory_format=memory_format)
    labels = torch.randint(0, CLASSES, (batch,), device=device)
    loss_fn = loss_function(config)
    return _optimizer_step(config, model, lambda: loss_fn(model(images), labels), device), batch


def _language_step(config: TrainConfig, device: torch.device, small: bool) -> tuple[Callable[[], torch.Tensor], int]:
    options, length, batch = config.model.options, config.text.sequence_length, config.data.batch_size
    vocabulary = VOCABULARY
    if small:
        options, length, batch, vocabulary = dict(options, n_layer=1, n_embd=64, n_head=4), 32, 2, 512
    model = build_language_model(config.model.name, vocab_size=vocabulary, sequence_length=length, options=options)
    apply_surgery_methods(model, plan_methods(config).surgeries)
    model.to(device).train()
    tokens = torch.randint(0, vocabulary, (batch, length + 1), device=device)

    def loss():
        logits = logits_of(model(tokens[:, :-1]))
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), tokens[:, 1:].flatten())

    return _optimizer_step(config, model, loss, device), batch * length


def _optimizer_step(config: TrainConfig, model: torch.nn.Module, loss: Callable[[], torch.Tensor],
                    device: torch.device) -> Callable[[], torch.Tensor]:
    optimizer = build_optimizer(model, config.optimizer)
    precision = choose_precision(config.precision, device)
    scaler = torch.amp.GradScaler(device.type, enabled=precision.dtype == torch.float16)

    def step() -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        with precision.autocast(device):
            value = loss()
        scaler.scale(value).backward()
        scaler.step(optimizer)
        scaler.update()
        return value

    return step


def steps_per_second(step: Callable[[], torch.Tensor], device: torch.device, steps: int) -> float:
    """The median step's rate over ``steps`` steps, after three warm-up steps (allocations, autotuning)."""
    for _ in range(3):
        step()
    durations = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        durations.append(time.perf_counter() - start)
    return 1 / statistics.median(durations)


def run(mode: Mode, record: Recorder) -> None:
    """One row per recipe, each pair's second recipe against its first."""
    for first, second in PAIRS:
        baseline_rate = None
        for name in (first, second):
            config = replace(get_recipe(name), compile=False)
            builder = _image_step if IMAGES <= task_named(config.task).traits else _language_step
            step, items = builder(config, mode.device, mode.small)
            rate = steps_per_second(step, mode.device, 3 if mode.small else 30)
            baseline_rate = baseline_rate or rate
            record.row(recipe=name, against=first, precision=choose_precision(config.precision, mode.device).name,
                       items_per_step=items, steps_per_second=rate, items_per_second=rate * items,
                       speedup=rate / baseline_rate)
    record.note("Items: images for the ResNets, tokens for the GPTs. "
                + ("Small mode: the recipes at tiny sizes on the CPU, not GPU figures." if mode.small else
                   "Each at its recipe's batch and final image size or sequence length; progressive resizing and "
                   "sequence-length warmup make a run's earlier steps cheaper than these."))
