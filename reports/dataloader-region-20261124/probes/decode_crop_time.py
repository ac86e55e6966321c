"""Decode + crop + resize of each of the 500 ImageNet sample photos, single-threaded, best of 3.

python decode_crop_time.py CODE_ROOT   (run from the project root; CODE_ROOT: a worktree of the commit to time)
Prints ms per photo at 176 and 88 px; with the region decoder also for files already known whole.
"""
import random, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import torch
torch.set_num_threads(1)
from fastcore_ops.data.crops import CropPlan
from fastcore_ops.data.pil_backend import decode_crop
import fastcore_ops
datas = [p.read_bytes() for p in sorted(Path("../shared/datasets/imagenet-sample").glob("*/*"))]
print(f"code: {fastcore_ops.__file__}; {len(datas)} photos")
takes_known_whole = "known_whole" in decode_crop.__code__.co_varnames
for size in (176, 88):
    for known_whole in ((False, True) if takes_known_whole else (False,)):
        plan, best = CropPlan(size, train=True), float("inf")
        options = {"known_whole": True} if known_whole else {}
        for _ in range(3):
            start = time.perf_counter()
            for i, data in enumerate(datas):
                decode_crop(data, plan, random.Random(i), **options)
            best = min(best, time.perf_counter() - start)
        label = "known whole" if known_whole else "first read" if takes_known_whole else "whole decode"
        print(f"{size} px, {label}: {1e3 * best / len(datas):.3f} ms per photo")
