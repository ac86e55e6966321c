"""Time ResNet-20 training steps alone (random data, no loader): the compute under each CIFAR step.

    PYTHONPATH=. python reports/cifar-step-compute-20261125/measure.py > reports/cifar-step-compute-20261125/step_times.csv

bf16 autocast, SGD with Nesterov momentum, each model of CONFIGURATIONS at each of its image sizes;
--warmup steps, then the median of --steps. Prints CSV: model, image size (px), ms per step.
"""

import argparse
import statistics
import time

import torch

from fastcore_ops.surgery import apply_surgery
from fastcore_ops.training.models.cifar_resnet import cifar_resnet20

MILD = ["blurpool", "channels_last"]
CONFIGURATIONS = {  # name -> (surgeries, image sizes)
    "cifar_baseline model (NCHW)": ([], [32]),
    "cifar_mild model": (MILD, [16, 20, 24, 28, 32]),
    "cifar_mild + squeeze-excite (32- and 64-channel stages)": (
        ["blurpool", ("squeeze_excite", {"min_channels": 32, "latent_channels": 0.25}), "channels_last"], [16, 32]),
    "cifar_mild + squeeze-excite (every convolution)": (
        ["blurpool", ("squeeze_excite", {"min_channels": 16, "latent_channels": 0.25}), "channels_last"], [16, 32]),
}


def step_milliseconds(surgeries, size: int, batch_size: int, warmup: int, steps: int) -> float:
    """Median milliseconds of one training step of the model with these surgeries, at this image size."""
    torch.manual_seed(0)
    model = cifar_resnet20(num_classes=10)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    apply_surgery(model, surgeries, optimizers=optimizer)
    images, labels = torch.randn(batch_size, 3, size, size), torch.randint(0, 10, (batch_size,))
    if "channels_last" in surgeries:
        images = images.contiguous(memory_format=torch.channels_last)

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(images).float(), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--warmup", type=int, default=4, help="untimed steps first")
    parser.add_argument("--steps", type=int, default=12, help="timed steps (their median is printed)")
    args = parser.parse_args(argv)
    print("model,image size (px),ms per step")
    for name, (surgeries, sizes) in CONFIGURATIONS.items():
        for size in sizes:
            milliseconds = step_milliseconds(surgeries, size, args.batch_size, args.warmup, args.steps)
            print(f"{name},{size},{milliseconds:.1f}", flush=True)


if __name__ == "__main__":
    main()
