"""How much of a JPEG decode is entropy decoding, which no crop can skip.

    python reports/dataloader-memory-20261124/probes/entropy_floor.py ../shared/datasets/imagenet-sample

Decodes every JPEG of the folder (CLASS/IMAGE) whole with simplejpeg and with the pil backend's
region decoder, then only entropy-decodes it (a corner of a few pixels at 1/8 scale, read to the
end): the best of --repeats passes, in ms per image. ``entropy_floor.txt`` ran when this script called
the C extension for a 1-pixel corner; ``decode_region`` widens it to 4 x 4, in the same row of blocks.
"""

import argparse
import math
import sys
import time
from pathlib import Path

import simplejpeg

from fastcore_ops.data.backends.workers.jpeg_region import decode_region


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, help="a folder of CLASS/IMAGE JPEGs")
    parser.add_argument("--repeats", type=int, default=3, help="passes over the images; the best is shown")
    args = parser.parse_args(argv)
    files = [path.read_bytes() for path in sorted(args.data.glob("*/*"))]
    headers = [simplejpeg.decode_jpeg_header(data) for data in files]  # (height, width, ...)
    if files and decode_region(files[0], 8, (1, 1), (0.0, 0.0, 1.0, 1.0), 1) is None:
        print("error: the region decoder is not built (or the first JPEG is CMYK): nothing to measure", file=sys.stderr)
        raise SystemExit(2)

    def best_ms(decode) -> float:
        best = float("inf")
        for _ in range(args.repeats):
            start = time.perf_counter()
            for data, header in zip(files, headers):
                decode(data, header)
            best = min(best, time.perf_counter() - start)
        return 1e3 * best / len(files)

    ways = {
        "whole decode, simplejpeg (bundled libjpeg-turbo)": lambda d, h: simplejpeg.decode_jpeg(d),
        "whole decode, our region decoder (system libjpeg-turbo)":
            lambda d, h: decode_region(d, 1, (h[1], h[0]), (0.0, 0.0, h[1], h[0]), max(h[:2])),
        "entropy decoding only (a corner at 1/8, read to the end)":
            lambda d, h: decode_region(d, 8, (math.ceil(h[1] / 8), math.ceil(h[0] / 8)), (0.0, 0.0, 1.0, 1.0), 1),
    }
    for name, decode in ways.items():
        print(f"{name}: {best_ms(decode):.3f} ms per photo")


if __name__ == "__main__":
    main()
