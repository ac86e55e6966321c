"""Epochs of the pil loader over the 500 photos at 176 px (batch 64, 2 workers), timed from outside by farm-bench.

Run: python probes/loader_epochs.py RANDAUGMENT(0/1) EPOCHS; prints the images delivered, and to
stderr which fastcore_ops it imported and the CPU time and page faults of the main process and of
its workers. Point PYTHONPATH at a git worktree to time another commit.
"""
import sys, time, torch
from pathlib import Path
from fastcore_ops.data import build_loader
from fastcore_ops.data.randaugment import RandAugmentOptions
import fastcore_ops; print(fastcore_ops.__file__, file=sys.stderr)
ra = RandAugmentOptions(depth=1) if sys.argv[1] == "1" else None
ld = build_loader(Path("/work/shared/datasets/imagenet-sample"), train=True, backend="pil", num_workers=2, seed=0,
                  batch_size=64, image_size=176, device="cpu", randaugment=ra)
n = 0
for ep in range(int(sys.argv[2])):
    ld.set_epoch(ep)
    for x, y in ld:
        n += len(y)
print(n)
import resource, gc
del ld; gc.collect(); time.sleep(0.5)
s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"main user {s.ru_utime:.2f} sys {s.ru_stime:.2f} minflt {s.ru_minflt}; workers user {c.ru_utime:.2f} sys {c.ru_stime:.2f} minflt {c.ru_minflt}", file=sys.stderr)
