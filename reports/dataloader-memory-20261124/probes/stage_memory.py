"""The batch stage's cost per image, single-threaded, by where its output's memory comes from (one worker's view).

    python reports/dataloader-memory-20261124/probes/stage_memory.py [--keep]

--keep first calls fastcore_ops.host_memory.keep_freed_memory(), as the pil backend's workers do.
Rows: the output in a new private tensor, in a new shared-memory block per batch (the workers
before efeec4c), in a reused shared-memory block (a slot, shared_slots.py). Random pixels,
median of the batches after the first 5.
"""

import argparse
import time

import torch

from fastcore_ops.data.transforms.device_stage import DeviceAugment
from fastcore_ops.data.transforms.randaugment import RandAugmentOptions
from fastcore_ops.host_memory import keep_freed_memory


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep freed memory, as the workers do")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--size", type=int, default=176, help="image side in pixels")
    parser.add_argument("--batches", type=int, default=45, help="batches per row; the first 5 are not counted")
    args = parser.parse_args(argv)
    if args.keep:
        assert keep_freed_memory(), "this C library cannot keep freed memory"
    torch.set_num_threads(1)
    shape = (args.batch_size, 3, args.size, args.size)
    batch = torch.randint(0, 256, shape, dtype=torch.uint8)
    slot = torch.empty(shape).share_memory_()

    def fresh_shared_block():
        return torch.empty(0).set_(torch.UntypedStorage._new_shared(slot.numel() * 4), 0, shape, slot.stride())

    outputs = {"new private tensor": lambda: None, "new shared block per batch": fresh_shared_block,
               "reused shared slot": lambda: slot}
    print(f"glibc keeps freed memory: {args.keep}")
    for randaugment in (None, RandAugmentOptions(depth=1)):
        stage = DeviceAugment(train=True, randaugment=randaugment)
        label = "flip + RandAugment + normalize" if randaugment else "flip + normalize"
        for name, output in outputs.items():
            generator = torch.Generator().manual_seed(0)
            times = []
            for _ in range(args.batches):
                start = time.perf_counter()
                stage(batch, generator=generator, out=output())
                times.append(time.perf_counter() - start)
            times = sorted(times[5:] or times)
            print(f"{label:32s} {name:28s} {1e3 * times[len(times) // 2] / shape[0]:.3f} ms per image")


if __name__ == "__main__":
    main()
