"""One pil worker's time per image at a given size, in this process: the whole path and where it goes.

Run: .venv/bin/python reports/dataloader-memory-20261124/probes/worker_time.py SIZE
Decodes the 500 sample photos through PilBackend(num_workers=0) with the batch stage (flip +
normalize), freed memory kept as in a worker, one thread; an untimed epoch first (so every file
is known whole), then two timed epochs, then cProfile of a third.
"""
import cProfile, pstats, sys, time, torch
from pathlib import Path
from fastcore_ops.host_memory import keep_freed_memory
keep_freed_memory()
torch.set_num_threads(1)
from fastcore_ops.data.pil_backend import PilBackend
from fastcore_ops.data.device_stage import DeviceAugment
from fastcore_ops.data.sources import find_samples
from fastcore_ops.data.decoded import RunPlan
size = int(sys.argv[1])
samples, classes = find_samples(Path("/work/shared/datasets/imagenet-sample"))
b = PilBackend(batch_size=64, train=True, image_size=176, num_workers=0, stage=DeviceAugment(train=True))
def epoch(e):
    n = 0
    starts = range(0, len(samples), 64)
    for batch in b.batches(samples, e, 0, [RunPlan(size, e * 100 + i) for i in range(len(starts))]):
        n += len(batch.labels)
    return n
epoch(0)
s = time.perf_counter(); n = sum(epoch(e) for e in (1, 2)); dt = time.perf_counter() - s
print(f"{size}px: {1e3*dt/n:.3f} ms/img single-threaded")
pr = cProfile.Profile(); pr.enable(); epoch(3); pr.disable()
pstats.Stats(pr).sort_stats("tottime").print_stats(14)
