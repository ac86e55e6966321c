"""Time ResNet-20 training steps alone (random data, no loader): the compute under each CIFAR step.

    python reports/cifar-step-compute-20261125/measure.py > reports/cifar-step-compute-20261125/step_times.csv

Batch 128, bf16 autocast, SGD with Nesterov momentum; 4 warm-up steps, then the median of 12.
"""

import statistics
import time

import torch

from fastcore_ops.surgery import apply_surgery
from training.models.cifar_resnet import cifar_resnet20

MILD = ["blurpool", "channels_last"]
CONFIGURATIONS = {  # name -> (surgeries, image sizes)
    "cifar_baseline model (NCHW)": ([], [32]),
    "cifar_mild model": (MILD, [16, 20, 24, 28, 32]),
    "cifar_mild + squeeze-excite (32- and 64-channel stages)": (
        ["blurpool", ("squeeze_excite", {"min_channels": 32, "latent_channels": 0.25}), "channels_last"], [16, 32]),
    "cifar_mild + squeeze-excite (every convolution)": (
        ["blurpool", ("squeeze_excite", {"min_channels": 16, "latent_channels": 0.25}), "channels_last"], [16, 32]),
}


def step_milliseconds(surgeries, size: int) -> float:
    torch.manual_seed(0)
    model = cifar_resnet20(num_classes=10)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    apply_surgery(model, surgeries, optimizers=optimizer)
    images, labels = torch.randn(128, 3, size, size), torch.randint(0, 10, (128,))
    if "channels_last" in surgeries:
        images = images.contiguous(memory_format=torch.channels_last)

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(images).float(), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    for _ in range(4):
        step()
    times = []
    for _ in range(12):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


print("model,image size (px),ms per step")
for name, (surgeries, sizes) in CONFIGURATIONS.items():
    for size in sizes:
        print(f"{name},{size},{step_milliseconds(surgeries, size):.1f}", flush=True)
