"""Flipping half of a uint8 batch on a CPU, one thread, four ways: ms per image (median of --repeats).

    python reports/dataloader-memory-20261124/probes/flip_time.py

cur: the batch indexed with a tensor of rows (flip_batch before efeec4c; still its path on a GPU);
v2: the same through 2-d views; v3: sample by sample (flip_batch on a CPU since efeec4c);
v4: sample by sample into an empty batch. The last column checks each gives cur's result.
"""

import argparse
import time

import torch


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--size", type=int, default=176, help="image side in pixels")
    parser.add_argument("--repeats", type=int, default=30, help="timings of each way")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    n = args.batch_size
    x = torch.randint(0, 256, (n, 3, args.size, args.size), dtype=torch.uint8)
    rows = (torch.rand(n, generator=torch.Generator().manual_seed(0)) < 0.5).nonzero().flatten()

    def cur():
        out = x.clone()
        out[rows] = x[rows].flip(-1)
        return out

    def v2():
        out = x.clone()
        picked = x.view(n, -1).index_select(0, rows).view(-1, *x.shape[1:]).flip(-1)
        out.view(n, -1).index_copy_(0, rows, picked.reshape(len(rows), -1))
        return out

    def v3():
        out = x.clone()
        for row in rows.tolist():
            out[row] = x[row].flip(-1)
        return out

    def v4():
        out = torch.empty_like(x)
        flipped = set(rows.tolist())
        for row in range(n):
            out[row].copy_(x[row].flip(-1) if row in flipped else x[row])
        return out

    def median_ms_per_image(way) -> float:
        way()
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            way()
            times.append(time.perf_counter() - start)
        return 1e3 * sorted(times)[len(times) // 2] / n

    for way in (cur, v2, v3, v4):
        print(way.__name__, median_ms_per_image(way), torch.equal(way(), cur()))


if __name__ == "__main__":
    main()
