"""The first epoch of cifar_record_muon_resize with its training images out of the page cache, from two checkouts
in turn: where the training process decodes its own batches, how much of its time is the data phase.

Run as root from the repository root (it empties the page cache before every run), with nothing else running:

    python reports/read-ahead-20261203/cold_start.py BEFORE_CHECKOUT AFTER_CHECKOUT OUT --pairs 2

Each checkout trains one epoch (25 steps at batch 2000, 28 px) on ../shared/datasets/cifar10-jpeg on 2 threads,
decoding in the training process (what ``data.num_workers=-1`` gives on a 2-core machine it has to itself); the
runs alternate, and OUT/cold_start.json gets each run's training time and phases, as the trainer logged them.
"""

import json
import subprocess
import sys
from pathlib import Path

from fastcore_ops import cli

DATA = Path("../shared/datasets/cifar10-jpeg").resolve()


def empty_page_cache() -> None:
    subprocess.run(["sync"], check=True)
    Path("/proc/sys/vm/drop_caches").write_text("1\n")


def train_one_epoch(checkout: Path, out: Path, data: Path, threads: int, settings: list[str]) -> dict:
    empty_page_cache()
    sets = [item for setting in settings for item in ("--set", setting)]
    subprocess.run([sys.executable, "-m", "fastcore_ops.training.train", "--recipe", "cifar_record_muon_resize",
                    "--set", "schedule.epochs=1", "--threads", str(threads), "--set", "data.num_workers=0", *sets,
                    "--eval-every", "0", "--no-progress", "--data", str(data), "--out", str(out)],
                   cwd=checkout, check=True, stdout=subprocess.DEVNULL)
    last = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    return {"train_seconds": last["train_seconds"], "phase_seconds": last["phase_seconds"]}


def parsed(argv: list[str] | None):
    """The command line, checked before anything is written; ValueError naming what is wrong."""
    parser = cli.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--set", action="append", default=[], help="passed on to the trainer")
    args = parser.parse_args(argv)
    for checkout in (args.before, args.after):
        if not (checkout / "fastcore_ops" / "training" / "train.py").is_file():
            raise ValueError(f"{checkout} is not a checkout of fastcore_ops; pass the repository's root")
    if not (args.data / "train").is_dir():
        raise ValueError(f"--data {args.data} has no train/ folder; pass CIFAR-10 as JPEGs (../shared/datasets/cifar10-jpeg)")
    if args.out.exists():
        raise ValueError(f"{args.out} exists; pass a new folder")
    if args.pairs < 1 or args.threads < 1:
        raise ValueError("--pairs and --threads must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the pairs; 2 with one ``error:`` line, and OUT not made, for a command line it cannot use."""
    try:
        args = parsed(argv)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True)
    runs = []
    for pair in range(args.pairs):
        for name, checkout in (("before", args.before), ("after", args.after))[:: 1 if pair % 2 == 0 else -1]:
            result = train_one_epoch(checkout.resolve(), (args.out / f"{name}-{pair}").resolve(), args.data.resolve(),
                                     args.threads, args.set)
            runs.append({"pair": pair, "checkout": name, **result})
            print(json.dumps(runs[-1]), flush=True)
    (args.out / "cold_start.json").write_text(json.dumps(runs, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
