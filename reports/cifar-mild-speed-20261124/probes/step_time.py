"""One ResNet-20 training step (SGD with Nesterov momentum) in a mode: eager, cl, bf16, cl_bf16, compile, compile_bf16...

    PYTHONPATH=. python reports/cifar-mild-speed-20261124/probes/step_time.py MODE [SIZE]

The mode's name says what is on: "cl" channels last, "bf16" bf16 autocast, "compile" torch.compile.
Prints the mean ms per step over --steps steps and how long the --warmup steps took.
"""

import argparse
import time

import torch

from fastcore_ops.training.models.cifar_resnet import cifar_resnet20


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", help="e.g. eager, cl, bf16, cl_bf16, compile, compile_bf16")
    parser.add_argument("size", type=int, nargs="?", default=32, help="image side in pixels (default 32)")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    parser.add_argument("--steps", type=int, default=20, help="timed steps")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    model = cifar_resnet20(num_classes=10)
    channels_last = "cl" in args.mode
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4)
    images = torch.randn(args.batch_size, 3, args.size, args.size)
    labels = torch.randint(0, 10, (args.batch_size,))
    if channels_last:
        images = images.contiguous(memory_format=torch.channels_last)
    forward = torch.compile(model) if "compile" in args.mode else model
    bf16 = "bf16" in args.mode

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = torch.nn.functional.cross_entropy(forward(images), labels)
        loss.backward()
        optimizer.step()

    start = time.perf_counter()
    for _ in range(args.warmup):
        step()
    warm = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    print(f"{args.mode:20s} size {args.size}: {1000 * (time.perf_counter() - start) / args.steps:.1f} ms/step "
          f"(warmup {warm:.1f}s)")


if __name__ == "__main__":
    main()
