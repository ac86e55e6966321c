"""Gathering a batch of 64 float images at 176 px in a random sample order (what a RandAugment round
does twice), one thread, mean of 10: index_select on the 4-d batch against on a 2-d view of it.

python gather_time.py
"""
import time
import torch
torch.set_num_threads(1)
images, order = torch.rand(64, 3, 176, 176), torch.randperm(64, generator=torch.Generator().manual_seed(0))
ways = {
    "index_select on the 4-d batch (before)": lambda: images.index_select(0, order),
    "index_select on a 2-d view (after)": lambda: images.reshape(64, -1).index_select(0, order).view(images.shape),
}
assert torch.equal(*(way() for way in ways.values()))
for name, way in ways.items():
    way()
    start = time.perf_counter()
    for _ in range(10):
        way()
    print(f"{name}: {100 * (time.perf_counter() - start):.2f} ms per batch")
