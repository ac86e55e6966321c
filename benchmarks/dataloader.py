"""``python -m benchmarks.dataloader``: images per second of our loaders against torchvision's.

One run, one table: the usual torchvision loader (ImageFolder, RandomResizedCrop, flip,
ToTensor, Normalize, a DataLoader with a worker per core), the same with torchvision's
RandAugment(num_ops=1), and each of our backends without and with RandAugment depth 1, all
at the same image size and batch, timed over several epochs after a warm-up epoch, each
delivering normalized float batches on the device. A second table says where one image's
time goes (decode, crop and resize, augmentation, host-to-device copy).
"""

from __future__ import annotations

import argparse
import csv
import gc
import json
import os
import time
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import torch
import torchvision
from PIL import Image
from torchvision import transforms
from tqdm import tqdm

from fastcore_ops.data import build_loader
from fastcore_ops.data.device_stage import DeviceAugment
from fastcore_ops.data.probe import jpeg_truncation
from fastcore_ops.data.randaugment import RandAugmentOptions, randaugment_batch

from .timing import device_name

IMAGENET_SAMPLE = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "imagenet-sample"
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def _torchvision_loader(root: Path, *, image_size: int, batch_size: int, workers: int, device: torch.device,
                        randaugment: bool) -> Iterable:
    """The loader most training scripts use, tuned fairly: persistent workers, pinned memory on CUDA."""
    steps = [transforms.RandomResizedCrop(image_size), transforms.RandomHorizontalFlip()]
    steps += [transforms.RandAugment(num_ops=1)] if randaugment else []
    steps += [transforms.ToTensor(), transforms.Normalize(MEAN, STD)]
    dataset = torchvision.datasets.ImageFolder(str(root), transforms.Compose(steps))
    return torch.utils.data.DataLoader(
        dataset, batch_size=batch_size, shuffle=True, drop_last=True, num_workers=workers,
        persistent_workers=workers > 0, pin_memory=device.type == "cuda",
    )


def _run_epoch(loader: Iterable, epoch: int, device: torch.device) -> int:
    """Draw one epoch of batches onto the device; the number of images."""
    if hasattr(loader, "set_epoch"):
        loader.set_epoch(epoch)
    count = 0
    for images, labels in loader:
        # A no-op for our loaders, which deliver on the device already; the baseline's copy.
        images, labels = images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
        count += images.shape[0]
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return count


def _images_per_second(loader: Iterable, epochs: int, device: torch.device, label: str) -> tuple[float, int]:
    """Images per second over ``epochs`` epochs after one warm-up epoch (worker start-up, caches)."""
    _run_epoch(loader, 0, device)
    start, images = time.perf_counter(), 0
    for epoch in tqdm(range(1, epochs + 1), desc=label, leave=False):
        images += _run_epoch(loader, epoch, device)
    seconds = time.perf_counter() - start
    del loader
    gc.collect()  # stop persistent workers now, not inside a later loader's forked workers
    return images / seconds, images


def _per_image_ms(fn: Callable[[], object], count: int, repeats: int = 3) -> float:
    """Best of ``repeats`` timings of ``fn``, per image: the cost without scheduling noise."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return 1e3 * best / count


def _breakdown(files: list[Path], image_size: int, batch_size: int, device: torch.device) -> list[dict]:
    """Single-threaded cost of each stage per image, in milliseconds."""
    files = files[:batch_size]
    encoded = [f.read_bytes() for f in files]
    decoded = [Image.open(f).convert("RGB") for f in files]
    crop = transforms.RandomResizedCrop(image_size)
    cropped = [crop(image) for image in decoded]
    to_tensor = transforms.Compose([transforms.ToTensor(), transforms.Normalize(MEAN, STD)])
    torchvision_randaugment = transforms.RandAugment(num_ops=1)
    uint8_batch = torch.stack([torch.from_numpy(np.array(c)).permute(2, 0, 1) for c in cropped])
    on_device = uint8_batch.to(device)
    floats = on_device.float() / 255
    stage = DeviceAugment(train=True, randaugment=RandAugmentOptions(depth=1))
    generator = torch.Generator(device=device).manual_seed(0)

    def synced(fn):
        def run():
            fn()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
        return run

    n = len(files)
    rows = [
        ("decode JPEG (Pillow, full size)", "both", lambda: [Image.open(f).convert("RGB") for f in files]),
        ("random-resized crop + resize (Pillow)", "both", lambda: [crop(image) for image in decoded]),
        ("JPEG truncation check (dali: first epoch; pil: rarely)", "ours", lambda: [jpeg_truncation(e) for e in encoded]),
        ("RandAugment, 1 op (torchvision, per PIL image)", "torchvision", lambda: [torchvision_randaugment(c) for c in cropped]),
        ("ToTensor + Normalize (per image)", "torchvision", lambda: [to_tensor(c) for c in cropped]),
        ("host-to-device copy, uint8 batch", "ours", synced(lambda: uint8_batch.to(device))),
        ("RandAugment, depth 1 (ours, on the batch)", "ours", synced(lambda: randaugment_batch(floats, generator=generator))),
        ("device stage: flip + RandAugment + normalize", "ours", synced(lambda: stage(on_device, generator=generator))),
    ]
    return [{"stage": name, "path": path, "ms_per_image": _per_image_ms(fn, n)} for name, path, fn in rows]


def _feeds_resnet50(data: Path, device: torch.device, workers: int, epochs: int) -> dict:
    """On a GPU: whether the dali backend (mixed decoding) keeps ResNet-50 at 224 px fed.

    Compares the loader's images/s at 224 px with ResNet-50's own training speed on synthetic
    batches (bf16 autocast, channels-last, SGD), the speed a perfect loader would allow.
    """
    batch = 128
    model = torchvision.models.resnet50().to(device, memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    images = torch.randn(batch, 3, 224, 224, device=device).contiguous(memory_format=torch.channels_last)
    labels = torch.randint(0, 1000, (batch,), device=device)

    def step():
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(3):
        step()
    torch.cuda.synchronize(device)
    start = time.perf_counter()
    for _ in range(10):
        step()
    torch.cuda.synchronize(device)
    training = 10 * batch / (time.perf_counter() - start)
    loader = build_loader(data, batch_size=64, train=True, image_size=224, device=device, backend="dali",
                          num_workers=workers, channels_last=True)
    feeding, _ = _images_per_second(loader, epochs, device, "dali at 224 px")
    return {"resnet50_train_images_per_s": training, "dali_224_images_per_s": feeding, "fed_fraction": feeding / training}


def _print_table(rows: list[dict], columns: list[tuple[str, str, str]]) -> None:
    widths = [max(len(title), *(len(format(r[key], spec)) for r in rows)) for key, title, spec in columns]
    print("  ".join(title.ljust(w) for (_, title, _), w in zip(columns, widths)))
    print("-" * (sum(widths) + 2 * len(widths)))
    for r in rows:
        print("  ".join(format(r[key], spec).ljust(w) for (key, _, spec), w in zip(columns, widths)))


def _plot(rows: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 0.45 * len(rows) + 1.2))
    colors = ["tab:gray" if r["loader"].startswith("torchvision") else "tab:green" for r in rows]
    ax.barh([r["loader"] for r in rows], [r["images_per_s"] for r in rows], color=colors)
    for i, r in enumerate(rows):
        ax.text(r["images_per_s"], i, f" {r['images_per_s']:.0f}  ({r['vs_baseline']:.2f}x)", va="center")
    ax.invert_yaxis()
    ax.set_xlabel("images / s (higher is better)")
    ax.set_title(title)
    ax.margins(x=0.25)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.dataloader", description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=IMAGENET_SAMPLE, help="an ImageFolder tree (default: the 500 ImageNet photos)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--image-size", type=int, default=176)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=3, help="timed epochs, after one warm-up epoch")
    parser.add_argument("--workers", type=int, default=os.cpu_count(), help="decoding workers (default: one per core)")
    parser.add_argument("--backends", default="pil,dali", help="our backends to time")
    parser.add_argument("--out", type=Path, default=Path("runs/benchmarks"))
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        parser.error(f"--data {args.data} is not a folder; pass an ImageFolder tree (root/<class>/<image>)")

    device = torch.device(args.device)
    common = dict(image_size=args.image_size, batch_size=args.batch, device=device)
    print(f"Device: {device_name(device)}; {args.data}; {args.image_size} px, batch {args.batch}, "
          f"{args.workers} workers, {args.epochs} timed epochs after a warm-up")

    rows = []
    for randaugment in (False, True):
        suffix = " + RandAugment" if randaugment else ""
        baseline_label = "torchvision" + suffix
        speed, images = _images_per_second(
            _torchvision_loader(args.data, workers=args.workers, randaugment=randaugment, **common),
            args.epochs, device, baseline_label)
        rows.append({"loader": baseline_label, "randaugment": randaugment, "images_per_s": speed, "images": images})
        baseline = speed
        for backend in args.backends.split(","):
            label = f"fastcore_ops {backend}" + suffix
            speed, images = _images_per_second(
                build_loader(args.data, train=True, backend=backend, num_workers=args.workers, seed=0,
                             randaugment=RandAugmentOptions(depth=1) if randaugment else None, **common),
                args.epochs, device, label)
            rows.append({"loader": label, "randaugment": randaugment, "images_per_s": speed, "images": images})
        for row in rows:
            if row["randaugment"] == randaugment:
                row["vs_baseline"] = row["images_per_s"] / baseline

    _print_table(rows, [("loader", "loader", ""), ("images_per_s", "images/s", ".1f"),
                        ("vs_baseline", "vs torchvision", ".2f"), ("images", "images timed", "d")])
    files = sorted(p for p in args.data.rglob("*") if p.is_file())
    breakdown = _breakdown(files, args.image_size, args.batch, device)
    print("\nWhere one image's time goes (single-threaded, best of 3, ms per image):")
    _print_table(breakdown, [("stage", "stage", ""), ("path", "loader", ""), ("ms_per_image", "ms / image", ".3f")])

    feed = None
    if device.type == "cuda" and "dali" in args.backends.split(","):
        feed = _feeds_resnet50(args.data, device, args.workers, args.epochs)
        print(f"\nResNet-50 at 224 px trains at {feed['resnet50_train_images_per_s']:.0f} images/s here; the dali "
              f"backend delivers {feed['dali_224_images_per_s']:.0f} images/s at 224 px: "
              f"{100 * min(1.0, feed['fed_fraction']):.0f}% of what the model can consume.")
    else:
        print("\nNo GPU here: whether DALI's GPU decoding keeps ResNet-50 fed at 224 px is measured only on a GPU.")

    args.out.mkdir(parents=True, exist_ok=True)
    meta = {"device": device_name(device), "data": str(args.data), "image_size": args.image_size,
            "batch": args.batch, "workers": args.workers, "epochs": args.epochs}
    (args.out / "dataloader.json").write_text(json.dumps({"meta": meta, "rows": rows, "breakdown": breakdown, "resnet50_feed": feed}, indent=2))
    with open(args.out / "dataloader.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    _plot(rows, args.out / "dataloader.png", f"Training loaders, {args.image_size} px, batch {args.batch}, "
                                             f"{device_name(device)}")
    print(f"Wrote {args.out / 'dataloader.csv'}, {args.out / 'dataloader.json'} and {args.out / 'dataloader.png'}")


if __name__ == "__main__":
    main()
