"""Part 3: ResNet-50 and GPT-2 small, training steps per second in bf16 before and after each surgery.

Each surgery alone on a fresh model (``benchmarks.surgery_workloads``): its parameters, the FLOPs of a
step and the throughput against the model as built. In small mode: ResNet-18 at 32 px and a
two-layer GPT-2, in fp32 (a CPU without bf16 units only emulates it).
"""

from __future__ import annotations

import torch

from benchmarks.gpu_check.parts import Mode, Recorder
from benchmarks.surgery_workloads import Workload, gpt2_workload, measure, resnet_workload
from fastcore_ops import list_surgeries


def workloads(small: bool) -> list[Workload]:
    """The models the part times: full size on a GPU, tiny in small mode."""
    if small:
        return [resnet_workload(2, 32, name="resnet18"),
                gpt2_workload(2, 32, name="gpt2 (2 layers, 64 wide)", n_layer=2, n_embd=64, n_head=4, n_positions=64,
                              vocab_size=512)]
    return [resnet_workload(128, 224), gpt2_workload(16, 1024)]


def run(mode: Mode, record: Recorder) -> None:
    """One row per model and surgery (the first row of each model: no surgery)."""
    available = {surgery["name"] for surgery in list_surgeries()}
    autocast = None if mode.small else torch.bfloat16
    for workload in workloads(mode.small):
        as_built = None
        for surgery in [None, *(name for name in workload.surgeries if name in available)]:
            row = measure(workload, surgery, mode.device, steps=3 if mode.small else 20, autocast=autocast)
            as_built = as_built or row["throughput"]
            record.row(model=row["model"], surgery=row["surgery"], parameters_M=row["parameters_M"],
                       step_GFLOPs=row["step_GFLOPs"], throughput=row["throughput"], unit=row["unit"],
                       vs_none=row["throughput"] / as_built)
    record.note("Training steps with SGD, "
                + ("fp32 (small mode: tiny models on the CPU, not GPU figures)." if mode.small else "bf16 autocast.")
                + " vs_none: throughput over the model's without surgery; each surgery is applied alone.")
