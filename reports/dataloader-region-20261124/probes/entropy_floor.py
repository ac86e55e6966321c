"""How much of a JPEG decode is entropy decoding, which no crop can skip (the 500 ImageNet photos).

python entropy_floor.py   (run from the project root with its .venv)
"""
import time
from pathlib import Path
import numpy as np
import simplejpeg
from fastcore_ops.data import _jpeg_region
datas = [p.read_bytes() for p in sorted(Path("../shared/datasets/imagenet-sample").glob("*/*"))]
headers = [simplejpeg.decode_jpeg_header(d) for d in datas]
out = np.empty(64 * 2**20, np.uint8)
def best_ms(fn):
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for data, header in zip(datas, headers):
            fn(data, header)
        best = min(best, time.perf_counter() - start)
    return 1e3 * best / len(datas)
rows = {
    "whole decode, simplejpeg (bundled libjpeg-turbo)": lambda d, h: simplejpeg.decode_jpeg(d),
    "whole decode, our region decoder (system libjpeg-turbo 2.1.5)":
        lambda d, h: _jpeg_region.decode_region(d, 1, 0, 0, h[1], h[0], out, True),
    "entropy decoding only (a 1-pixel region at 1/8, read to the end)":
        lambda d, h: _jpeg_region.decode_region(d, 8, 0, 0, 1, 1, out, True),
}
for name, fn in rows.items():
    print(f"{name}: {best_ms(fn):.3f} ms per photo")
