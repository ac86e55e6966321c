"""A ResNet-20 bf16 training step (channels last) with each CPU BlurPool path: none, strided, current.

    PYTHONPATH=. python reports/cifar-mild-speed-20261124/probes/blurpool_paths.py {none,strided,current} SIZE

none: no BlurPool; strided: BlurPool as one strided depthwise convolution (the path before
issue 18); current: the library's path (on a CPU, blur at stride 1, then subsample).
Prints the mean ms per step over --steps steps after --warmup steps.
"""

import argparse
import time

import torch
import torch.nn.functional as F

import fastcore_ops.kernels.blurpool as blurpool
from fastcore_ops.surgery import apply_surgery
from training.models.cifar_resnet import cifar_resnet20


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variant", choices=("none", "strided", "current"))
    parser.add_argument("size", type=int, help="image side in pixels")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    parser.add_argument("--steps", type=int, default=15, help="timed steps")
    args = parser.parse_args(argv)
    current = blurpool._blurpool2d_eager
    if args.variant == "strided":
        blurpool._blurpool2d_eager = blurpool.blurpool2d_reference
    try:
        torch.manual_seed(0)
        model = cifar_resnet20(num_classes=10)
        apply_surgery(model, ["channels_last"] if args.variant == "none" else ["blurpool", "channels_last"])
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        images = torch.randn(args.batch_size, 3, args.size, args.size).contiguous(memory_format=torch.channels_last)
        labels = torch.randint(0, 10, (args.batch_size,))

        def step():
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = F.cross_entropy(model(images), labels)
            loss.backward()
            optimizer.step()

        for _ in range(args.warmup):
            step()
        start = time.perf_counter()
        for _ in range(args.steps):
            step()
        print(f"{args.variant:10s} {args.size} px: {1000 * (time.perf_counter() - start) / args.steps:.1f} ms/step")
    finally:
        blurpool._blurpool2d_eager = current


if __name__ == "__main__":
    main()
