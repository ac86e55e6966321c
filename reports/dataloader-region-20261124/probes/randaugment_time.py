"""RandAugment depth 1 on 64 random images at 176 px, one thread: median of 30 batches (the same
seeded draws at every commit).

python randaugment_time.py CODE_ROOT   (run from the project root)
"""
import statistics, sys, time
sys.path.insert(0, sys.argv[1])
import torch
torch.set_num_threads(1)
import fastcore_ops
from fastcore_ops.data.randaugment import randaugment_batch
images, generator = torch.rand(64, 3, 176, 176), torch.Generator().manual_seed(0)

def median_ms_per_image(fn):
    fn()
    times = []
    for _ in range(30):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times) / 64

print(f"code: {fastcore_ops.__file__}")
print(f"RandAugment depth 1: {median_ms_per_image(lambda: randaugment_batch(images, generator=generator)):.3f} ms per image")
