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

from fastcore_ops.kernels.blur_maxpool import blur_maxpool2d_reference
from fastcore_ops.kernels.blurpool import blurpool2d_reference
from fastcore_ops.surgery import apply_surgery
from fastcore_ops.surgery.blurpool import BlurConv2d, BlurMaxPool2d
from fastcore_ops.training.models.cifar_resnet import cifar_resnet20


def blur_strided(model: torch.nn.Module) -> None:
    """Make the BlurPool surgery's modules in ``model`` blur as one strided depthwise convolution (the reference)."""
    for module in model.modules():
        if isinstance(module, BlurConv2d):
            module.forward = lambda x, m=module: m.conv(blurpool2d_reference(x, m.blur_stride))
        elif isinstance(module, BlurMaxPool2d):
            module.forward = lambda x, m=module: blur_maxpool2d_reference(x, m.kernel_size, m.stride, m.padding)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variant", choices=("none", "strided", "current"))
    parser.add_argument("size", type=int, help="image side in pixels")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    parser.add_argument("--steps", type=int, default=15, help="timed steps")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    model = cifar_resnet20(num_classes=10)
    apply_surgery(model, ["channels_last"] if args.variant == "none" else ["blurpool", "channels_last"])
    if args.variant == "strided":
        blur_strided(model)
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


if __name__ == "__main__":
    main()
