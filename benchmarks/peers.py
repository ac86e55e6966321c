"""``python -m benchmarks.peers``: our trainer against a peer's, and our step against its floor.

Trains one image-classification recipe (default ``cifar_mild``) with ``python -m
fastcore_ops.training.train``, and beside it the peer ``--peer`` names, in alternating pairs: ours
first in even pairs, the peer first in odd ones, so that a drift of the machine weighs on both.

- ``composer`` (the default): the same job with Composer 0.32.1's Trainer (``benchmarks.composer_job``:
  the same model, methods, optimizer and steps; its images through torchvision's DataLoader as its
  users write it, or through ours with ``--composer-loader ours``).
- ``airbench``: the CIFAR-10 speed record, airbench94 (airbench 0.1.8), its own recipe through its
  own code on the CPU (``benchmarks.airbench_job``, which lists where it has to differ), on the same
  images. Pair N trains both from held-out seed 3 + N, and the table gives each side's top-1, with
  and without TTA, over the seeds.

Each
run is a process of its own and writes its folder under ``OUT/runs/``; a run whose
``summary.json`` is there is not run again, so an interrupted benchmark continues where it
stopped. A run that fails ends the benchmark with exit status 1 and the path of its log.

Then the floor (``benchmarks.step_floor``): the recipe's model as our trainer trains it,
forward plus backward on random batches already in memory, at every image size the run trains
at, weighted by how many steps it trains at each; each size's fastest step, and beside it its
median step (a stem that ``stem_freezing`` freezes, frozen for the steps after). No loader, no
optimizer step, no other method. Our training time over that floor is how
close our step comes to what the model alone costs here.

The peers live in a folder of their own (``make peers``; Composer pins an older torch, so they
are installed without their dependencies). Without the peer the benchmark says so in one line
and times ours and the floor only.

    python -m benchmarks.peers --data ../shared/datasets/cifar10-jpeg --pairs 3 --out runs/peers
    python -m benchmarks.peers --peer airbench --recipe cifar_mild --pairs 3 \\
        --data ../shared/datasets/cifar10-jpeg --out runs/peers-airbench

Writes ``peers.csv`` and ``peers.json`` (one row per run, and the floor), ``peers.md`` (the
table printed at the end) and ``peers.png`` (training time per run, the floor marked).
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
from pathlib import Path

from fastcore_ops import cli
from fastcore_ops.owned_folder import claim_folder
from fastcore_ops.training.recipes import list_recipes
from fastcore_ops.training.tradeoff.options import FIRST_UNSEARCHED_SEED
from fastcore_ops.training.train import child_environment

from .job_cli import LOADERS

# torch, matplotlib and the trainer's configuration are imported where they are used, once the command line parsed.

REPOSITORY = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPOSITORY.parent / "shared" / "datasets" / "cifar10-jpeg"
# Each peer: the name it goes by in the tables, the package it is imported as, and its distribution's name.
PEERS = {"composer": ("Composer", "composer", "mosaicml"), "airbench": ("airbench", "airbench", "airbench")}


class JobFailed(Exception):
    """A run (or the floor) exited with an error; the message names its log."""


def peer_version(peers: Path, peer: str) -> str | None:
    """``peer``'s version as importable from ``peers`` (after this environment's packages), None if it is not."""
    _, package, distribution = PEERS[peer]
    probe = (f"import sys; sys.path.append({str(peers.resolve())!r}); import {package}; "
             f"from importlib.metadata import version; print(version({distribution!r}))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


def run_order(pairs: int, trainers: tuple[str, ...]) -> list[tuple[int, str]]:
    """(pair, trainer) in the order they run: pairs alternate which trainer goes first.

        >>> run_order(2, ("ours", "composer"))
        [(0, 'ours'), (0, 'composer'), (1, 'composer'), (1, 'ours')]
    """
    return [(pair, trainer) for pair in range(pairs) for trainer in (trainers if pair % 2 == 0 else trainers[::-1])]


def pair_seed(pair: int) -> int:
    """The held-out seed both runs of ``pair`` train from against airbench.

        >>> pair_seed(0)
        3
    """
    return FIRST_UNSEARCHED_SEED + pair


def job_command(trainer: str, args, folder: Path, pair: int | None = None) -> list[str]:
    """The command line of one run: ``fastcore_ops.training.train`` for ours, ``benchmarks.composer_job`` or
    ``benchmarks.airbench_job`` for the peer; against airbench, ``pair``'s seed for both."""
    subset = [f"--subset={args.subset}"] * (args.subset is not None)
    if trainer == "airbench":
        return [sys.executable, "-m", "benchmarks.airbench_job", "--data", str(args.data), "--out", str(folder),
                "--peers", str(args.peers), "--seed", str(pair_seed(pair)), "--precision", args.config.precision,
                *subset, *[f"--epochs={args.airbench_epochs}"] * (args.airbench_epochs is not None),
                *[f"--batch-size={args.airbench_batch_size}"] * (args.airbench_batch_size is not None)]
    seeded = args.peer == "airbench" and pair is not None
    assignments = [*args.assignments, *([f"seed={pair_seed(pair)}"] if seeded else [])]
    common = ["--recipe", args.recipe, "--data", str(args.data), "--out", str(folder), "--device", str(args.device)]
    common += subset
    common += [part for assignment in assignments for part in ("--set", assignment)]
    if trainer == "floor":
        return [sys.executable, "-m", "benchmarks.step_floor", *common]
    if trainer == "ours":
        # An interrupted run of ours continues from its last checkpoint; Composer's runs start again.
        resume = ["--resume"] * (folder / "config.json").is_file()
        return [sys.executable, "-m", "fastcore_ops.training.train", *common, "--no-progress", "--eval-every", "0", *resume]
    return [sys.executable, "-m", "benchmarks.composer_job", *common, "--peers", str(args.peers),
            "--loader", args.composer_loader]


def run_job(trainer: str, name: str, args, pair: int | None = None) -> dict:
    """Run one job (of ``pair``) in a process of its own, at full speed, unless its ``summary.json`` is there; that
    summary."""
    folder = args.out / "runs" / name
    summary_file = folder / "summary.json"
    if not summary_file.is_file():
        log = args.out / "runs" / f"{name}.log"
        print(f"{name}: running (log: {log})", flush=True)
        with open(log, "w") as output:
            done = subprocess.run(job_command(trainer, args, folder, pair), cwd=REPOSITORY, env=child_environment(),
                                  stdout=output, stderr=subprocess.STDOUT)
        if done.returncode != 0:
            raise JobFailed(f"{name} failed (exit {done.returncode}); see {log}")
    return json.loads(summary_file.read_text())


def run_pair_job(trainer: str, pair: int, args) -> dict:
    """Train one run (or read the summary it left), as a row: trainer, pair, seconds, steps, top-1, phases; against
    airbench also the seed and the top-1 with TTA (None without)."""
    summary = run_job(trainer, f"{trainer}-{pair}", args, pair)
    phases = summary.get("phase_seconds", {})
    seeded = ({"seed": pair_seed(pair), "top1_tta": summary["metrics"].get("top1_tta"),
               "tta_seconds": summary.get("tta_seconds"), "read_seconds": summary.get("read_seconds"),
               "train_read_seconds": summary.get("train_read_seconds")}
              if args.peer == "airbench" else {})
    return {"trainer": trainer, "pair": pair, "train_seconds": summary["train_seconds"], "steps": summary["steps"],
            "top1": summary["metrics"]["top1"], **seeded,
            **{f"phase.{name}": seconds for name, seconds in phases.items()}}


def top1_over_seeds(rows: list[dict], trainer: str, metric: str) -> str | None:
    """``trainer``'s ``metric`` over its runs' seeds: mean, spread and each, in percent; None where it has none.

        >>> top1_over_seeds([{"trainer": "ours", "seed": 3, "top1": 0.9}, {"trainer": "ours", "seed": 4, "top1": 0.92}],
        ...                 "ours", "top1")
        'mean 91.00%, spread 90.00% to 92.00% (sd 1.41; seeds 3: 90.00%, 4: 92.00%)'
    """
    found = [(row["seed"], 100 * row[metric]) for row in rows if row["trainer"] == trainer and row.get(metric) is not None]
    if not found:
        return None
    values = [value for _, value in found]
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return (f"mean {statistics.mean(values):.2f}%, spread {min(values):.2f}% to {max(values):.2f}% (sd {sd:.2f}; "
            f"seeds {', '.join(f'{seed}: {value:.2f}%' for seed, value in found)})")


def seeds_lines(rows: list[dict], peer: str) -> list[str]:
    """Each side's top-1 over the held-out seeds, without and with TTA, where it has them, the peer's time with
    its timed TTA evaluation, and the reading of its images that its clock leaves out, with the peer's time over
    ours when its training images' part is charged to it."""
    with_tta = [row["train_seconds"] + row["tta_seconds"] for row in rows
                if row["trainer"] == peer and row.get("tta_seconds") is not None]
    lines = [f"{PEERS[peer][0]}'s time with its TTA evaluation, as it times itself: median "
             f"{statistics.median(with_tta):.1f} s."] if with_tta else []
    read = [row for row in rows if row["trainer"] == peer and row.get("read_seconds") is not None]
    if read:
        ours = {row["pair"]: row for row in rows if row["trainer"] == "ours"}
        phases = [row["phase.data"] for row in ours.values() if "phase.data" in row]
        lines.append(f"{PEERS[peer][0]}'s clock starts with its images decoded in memory: reading its training and test images took median "
                     f"{statistics.median(row['read_seconds'] for row in read):.1f} s outside its time; ours decodes within its own"
                     + (f" (its data phase: median {statistics.median(phases):.1f} s)." if phases else "."))
        # Like for like, from image files to a trained model: its time with its training images' reading charged
        # to it (ours decodes its training images on its clock, its test images after it).
        charged = [(row["train_seconds"] + row["train_read_seconds"]) / ours[row["pair"]]["train_seconds"]
                   for row in read if row["pair"] in ours and row.get("train_read_seconds") is not None]
        if charged:
            lines.append(f"{PEERS[peer][0]}'s time with the reading of its training images charged to it, over ours: "
                         f"median {statistics.median(charged):.3f}x (pairs: {', '.join(f'{r:.3f}x' for r in charged)}).")
    for trainer in ("ours", peer):
        for metric, judged in (("top1", "without TTA"), ("top1_tta", "with TTA")):
            if (spread := top1_over_seeds(rows, trainer, metric)) is not None:
                side = "Our" if trainer == "ours" else f"{PEERS[trainer][0]}'s"
                lines.append(f"{side} top-1 {judged}: {spread}.")
    return lines


def summary_table(rows: list[dict], floor: dict, peer: str = "composer") -> str:
    """The markdown table of the runs, each pair's ratio, and our time over the floor; against airbench, each
    side's top-1 over the seeds."""
    lines = ["| pair | trainer | training time | top-1 | time / ours | time / floor |", "|---|---|---|---|---|---|"]
    ours = {row["pair"]: row["train_seconds"] for row in rows if row["trainer"] == "ours"}
    for row in rows:
        over_ours = row["train_seconds"] / ours[row["pair"]] if row["pair"] in ours else None
        lines.append(f"| {row['pair']} | {row['trainer']} | {row['train_seconds']:.1f} s | {100 * row['top1']:.2f}% "
                     f"| {'' if over_ours is None else f'{over_ours:.3f}x'} "
                     f"| {row['train_seconds'] / floor['train_seconds']:.3f}x |")
    lines.append(f"| | floor (forward + backward alone, fastest steps) | {floor['train_seconds']:.1f} s | | | 1x |")
    lines.append(f"| | the same, median steps | {floor['median_train_seconds']:.1f} s | | "
                 f"| {floor['median_train_seconds'] / floor['train_seconds']:.3f}x |")
    ratios = [row["train_seconds"] / ours[row["pair"]] for row in rows
              if row["trainer"] == peer and row["pair"] in ours]
    if ratios:
        lines.append(f"\n{PEERS[peer][0]}'s time over ours: median {statistics.median(ratios):.3f}x "
                     f"(pairs: {', '.join(f'{r:.3f}x' for r in ratios)}).")
    if peer == "airbench":
        lines += seeds_lines(rows, peer)
    mine = [seconds / floor["train_seconds"] for seconds in ours.values()]
    over_medians = [seconds / floor["median_train_seconds"] for seconds in ours.values()]
    lines.append(f"Our time over the floor: median {statistics.median(mine):.3f}x "
                 f"(over the floor of median steps: {statistics.median(over_medians):.3f}x).")
    for row in (row for row in rows if row["trainer"] == "ours"):
        spent = ", ".join(f"{name.removeprefix('phase.')} {seconds:.1f} s" for name, seconds in row.items()
                          if name.startswith("phase."))
        lines.append(f"Where our pair {row['pair']} run's {row['train_seconds']:.1f} s went: {spent}.")
    return "\n".join(lines)


def peers_figure(rows: list[dict], floor: dict, title: str, peer: str = "composer"):
    """Training time of every run, ours green and the peer's grey, side by side per pair, with its top-1 on
    top; the floor dashed, the floor of median steps dotted, both named in the legend below the bars."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    from fastcore_ops.training.figures import plt

    fig, ax = plt.subplots(figsize=(7, 4.6))
    colors = {"ours": "tab:green", peer: "tab:gray"}
    for row in rows:
        x = row["pair"] + (0.2 if row["trainer"] == peer else -0.2)
        ax.bar(x, row["train_seconds"], width=0.38, color=colors[row["trainer"]])
        ax.annotate(f"{100 * row['top1']:.1f}%", (x, row["train_seconds"]), ha="center", va="bottom", fontsize=8)
    floors = ((floor["train_seconds"], "--", "floor: forward + backward alone, fastest steps"),
              (floor["median_train_seconds"], ":", "the same, median steps"))
    for seconds, style, _ in floors:
        ax.axhline(seconds, color="black", linestyle=style, linewidth=1)
    ax.set(xlabel="pair", ylabel="training time (s)", title=title)
    ax.set_xticks(sorted({row["pair"] for row in rows}))
    ax.margins(y=0.12)  # room for the top-1 over the tallest bar
    handles = [Patch(color=color, label=trainer) for trainer, color in colors.items()]
    handles += [Line2D([], [], color="black", linestyle=style, linewidth=1, label=label) for _, style, label in floors]
    ax.legend(handles=handles, fontsize=8, ncols=2, loc="upper center", bbox_to_anchor=(0.5, -0.16))
    return fig


def build_parser() -> cli.ArgumentParser:
    """The command line of ``python -m benchmarks.peers``."""
    parser = cli.ArgumentParser(prog="python -m benchmarks.peers", description=cli.description(__doc__))
    parser.add_argument("--recipe", default="cifar_mild", help="an image-classification recipe")
    cli.machine_default(parser.add_argument(
        "--data", type=Path, default=DEFAULT_DATA,
        help="a folder with train/ and val/ (or test/) (default: ../shared/datasets/cifar10-jpeg beside the repository)"))
    parser.add_argument("--pairs", type=cli.positive_int, default=3, help="alternating pairs of runs")
    parser.add_argument("--subset", type=cli.positive_int, help="train on the first N images of each class")
    parser.add_argument("--set", dest="assignments", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                        help="configuration override for both trainers; repeatable")
    parser.add_argument("--peer", choices=tuple(PEERS), default="composer",
                        help="Composer's Trainer on the same job, or airbench94's own recipe on the same images")
    cli.machine_default(parser.add_argument(
        "--peers", type=Path, default=REPOSITORY / ".peers",
        help="the folder the peers are installed in (default: .peers in the repository, which make peers fills)"))
    parser.add_argument("--composer-loader", choices=LOADERS, default="torchvision",
                        help="Composer's training images through torchvision's DataLoader, as its users write it, "
                             "or through our loader, which leaves the two trainers alone to compare")
    parser.add_argument("--airbench-epochs", type=cli.positive_float,
                        help="airbench's epochs instead of its 9.9, for a short test")
    parser.add_argument("--airbench-batch-size", type=cli.positive_int,
                        help="airbench's batch instead of its 1024, for a short test")
    cli.add_device_option(parser)
    parser.add_argument("--out", type=cli.claimable_folder("peers"), required=True,
                        help="folder for the tables, the plot and every run's folder (OUT/runs/)")
    return parser


def check_args(args: argparse.Namespace) -> None:
    """What the parser cannot check; ``args.config`` becomes the recipe with its overrides."""
    import torch

    from fastcore_ops.training.config import override
    from fastcore_ops.training.recipes import get_recipe

    from . import composer_run

    args.device = torch.device(args.device)
    args.data, args.out, args.peers = args.data.resolve(), args.out.resolve(), args.peers.resolve()
    if not args.data.is_dir():
        raise ValueError(f"--data {args.data} is not a folder; give one with train/ and val/ (or test/) in it")
    args.config = override(get_recipe(cli.check_name("--recipe", args.recipe, list_recipes(), "recipe")),
                           args.assignments)
    if args.peer == "composer":
        composer_run.check(args.config)
    elif args.device.type != "cpu":
        raise ValueError(f"--device {args.device}: the airbench job runs on the CPU; on a GPU, run airbench itself")
    if args.peer != "airbench" and (args.airbench_epochs, args.airbench_batch_size) != (None, None):
        raise ValueError(f"--airbench-epochs and --airbench-batch-size set airbench's run; this is --peer {args.peer}")


@cli.command(build_parser, check_args)
def main(args: argparse.Namespace) -> int:
    claim_folder(args.out, "peers")
    (args.out / "runs").mkdir(exist_ok=True)
    name = PEERS[args.peer][0]
    version = peer_version(args.peers, args.peer)
    if version is None:
        print(f"{name} cannot be imported from {args.peers} (make peers installs it): timing ours and the floor only")
    trainers = ("ours", args.peer) if version else ("ours",)
    try:
        rows = [run_pair_job(trainer, pair, args) for pair, trainer in run_order(args.pairs, trainers)]
        floor = {"trainer": "floor", "pair": None, **run_job("floor", "floor", args)}
    except JobFailed as error:
        print(cli.error_line(error), file=sys.stderr)
        return 1
    from fastcore_ops.training.figures import save_figure

    from .timing import device_name

    table = summary_table(rows, floor, args.peer)
    machine = device_name(args.device)
    loader = f" with the {args.composer_loader} loader" if version and args.peer == "composer" else ""
    header = (f"{args.recipe} on {args.data.name}{f' (--subset {args.subset})' if args.subset else ''}, "
              f"{machine}, {name} {version or 'not installed'}{loader}")
    print(f"\n{header}\n\n{table}")
    (args.out / "peers.md").write_text(f"{header}\n\n{table}\n")
    settings = ({"composer_loader": args.composer_loader} if args.peer == "composer"
                else {"airbench_epochs": args.airbench_epochs, "airbench_batch_size": args.airbench_batch_size})
    (args.out / "peers.json").write_text(json.dumps({"recipe": args.recipe, "machine": machine, args.peer: version,
                                                     **settings, "settings": args.assignments, "runs": rows,
                                                     "floor": floor}, indent=2))
    fields = list(dict.fromkeys(key for row in rows for key in row))
    with open(args.out / "peers.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows + [floor])
    figure = peers_figure(rows, floor, f"{args.recipe}: ours against {name} {version or '(absent)'}", args.peer)
    save_figure(figure, args.out / "peers.png", tight=True)  # the legend sits below the axes
    print(f"Wrote {', '.join(str(args.out / name) for name in ('peers.md', 'peers.csv', 'peers.json', 'peers.png'))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
