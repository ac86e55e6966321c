"""The batch stage's cost per image, single-threaded, by where its memory comes from (one worker's view).

Run: .venv/bin/python reports/dataloader-memory-20261124/probes/stage_memory.py [keep]
"keep" first calls fastcore_ops.host_memory.keep_freed_memory(), as the pil backend's workers
now do. Rows: the output in a new private tensor, in a new shared-memory block per batch (the
workers before efeec4c), in a reused shared-memory block (a slot, shared_slots.py). 64 photos'
worth of random pixels at 176 px, median of 40 batches after 5.
"""
import sys
import time

import torch

from fastcore_ops.data.device_stage import DeviceAugment
from fastcore_ops.data.randaugment import RandAugmentOptions

if sys.argv[1:] == ["keep"]:
    from fastcore_ops.host_memory import keep_freed_memory
    assert keep_freed_memory()
torch.set_num_threads(1)
shape = (64, 3, 176, 176)
batch = torch.randint(0, 256, shape, dtype=torch.uint8)
slot = torch.empty(shape).share_memory_()


def fresh_shared_block():
    return torch.empty(0).set_(torch.UntypedStorage._new_shared(slot.numel() * 4), 0, shape, slot.stride())


outputs = {"new private tensor": lambda: None, "new shared block per batch": fresh_shared_block, "reused shared slot": lambda: slot}
print(f"glibc keeps freed memory: {sys.argv[1:] == ['keep']}")
for randaugment in (None, RandAugmentOptions(depth=1)):
    stage = DeviceAugment(train=True, randaugment=randaugment)
    for name, output in outputs.items():
        generator = torch.Generator().manual_seed(0)
        times = []
        for i in range(45):
            start = time.perf_counter()
            stage(batch, generator=generator, out=output())
            times.append(time.perf_counter() - start)
        times = sorted(times[5:])
        label = "flip + RandAugment + normalize" if randaugment else "flip + normalize"
        print(f"{label:32s} {name:28s} {1e3 * times[len(times) // 2] / shape[0]:.3f} ms per image")
