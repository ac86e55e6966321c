"""The tables of ``python -m benchmarks.dataloader`` (its module says what each measures), imported once its
command line is parsed.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import time
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torchvision
from PIL import Image
from torchvision import transforms

from fastcore_ops.data import build_loader
from fastcore_ops.data.backends.crops import CropPlan
from fastcore_ops.data.backends.pil import decode_crop
from fastcore_ops.data.backends.probe import jpeg_truncation
from fastcore_ops.data.prepare import PrepareSettings
from fastcore_ops.data.shard_writer import prepare_shards, shrunk_jpeg
from fastcore_ops.data.sources import find_samples
from fastcore_ops.data.transforms.device_stage import DeviceAugment
from fastcore_ops.data.transforms.randaugment import RandAugmentOptions, randaugment_batch
from fastcore_ops.owned_folder import claim_folder
from fastcore_ops.training.precision import choose_precision
from fastcore_ops.training.recipes import get_recipe

from .loaders import MEAN, STD, ScheduledResizedCrop, images_per_second, one_core_busy, torchvision_loader
from .timing import device_name

MILD = get_recipe("resnet50_mild")
PREPARED = PrepareSettings(max_side=256, quality=90, shard_size=1000)


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
    plan = CropPlan(image_size, train=True)
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
        ("decode around the crop + resize (ours: pil)", "ours",
         lambda: [decode_crop(e, plan, random.Random(i)) for i, e in enumerate(encoded)]),
        ("JPEG truncation check (dali: first epoch; pil: in its decode)", "ours",
         lambda: [jpeg_truncation(e) for e in encoded]),
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
    batches (the resnet50 recipes' precision, channels-last, SGD), the speed a perfect loader would allow.
    """
    precision = choose_precision(MILD.precision, device)
    print(f"ResNet-50's own speed: {precision.describe()}")
    batch = 128
    model = torchvision.models.resnet50().to(device, memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    images = torch.randn(batch, 3, 224, 224, device=device).contiguous(memory_format=torch.channels_last)
    labels = torch.randint(0, 1000, (batch,), device=device)

    def step():
        with precision.autocast(device):
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
    feeding, _ = images_per_second(loader, epochs, device, "dali at 224 px")
    return {"resnet50_train_images_per_s": training, "dali_224_images_per_s": feeding, "fed_fraction": feeding / training}


class _Rows:
    """The timed rows, each with its section and its ratio to the section's torchvision baseline."""

    def __init__(self, args: argparse.Namespace, device: torch.device):
        self.args, self.device = args, device
        self.rows: list[dict] = []
        self.baseline: dict[str, float] = {}

    def time(self, section: str, label: str, loader, randaugment: bool, baseline: bool = False,
             before_epoch=None) -> None:
        speed, images = images_per_second(loader, self.args.epochs, self.device, f"{section}: {label}", before_epoch)
        key = f"{section}/{randaugment}"
        if baseline:
            self.baseline[key] = speed
        self.rows.append({"section": section, "loader": label, "randaugment": randaugment, "images_per_s": speed,
                          "images": images, "vs_baseline": speed / self.baseline[key]})

    def torchvision(self, root: Path, randaugment: bool, crop: torch.nn.Module | None = None):
        crop = crop or transforms.RandomResizedCrop(self.args.image_size)
        return torchvision_loader(root, crop=crop, batch_size=self.args.batch_size, workers=self.args.workers,
                                  device=self.device, randaugment=randaugment)

    def ours(self, source: Path, backend: str, randaugment: bool, **options):
        return build_loader(source, train=True, backend=backend, num_workers=self.args.workers, seed=0,
                            batch_size=self.args.batch_size, image_size=self.args.image_size, device=self.device,
                            randaugment=RandAugmentOptions(depth=1) if randaugment else None, **options)


def _fixed_size(rows: _Rows, section: str) -> None:
    for randaugment in (False, True):
        suffix = " + RandAugment" if randaugment else ""
        rows.time(section, "torchvision" + suffix, rows.torchvision(rows.args.data, randaugment), randaugment,
                  baseline=True)
        for backend in rows.args.backends:
            rows.time(section, f"fastcore_ops {backend}{suffix}", rows.ours(rows.args.data, backend, randaugment),
                      randaugment)


def _progressive(rows: _Rows) -> None:
    """The Mild schedule over the warm-up and timed epochs; torchvision changes its size per epoch."""
    schedule, epochs = MILD.methods.progressive_resize, rows.args.epochs + 1
    crop = ScheduledResizedCrop(rows.args.image_size)

    def set_size(epoch: int) -> None:
        crop.size.value = schedule.size(rows.args.image_size, (epoch + 0.5) / epochs)

    rows.time("progressive", "torchvision (full decode, crop to the scheduled size)",
              rows.torchvision(rows.args.data, False, crop), False, baseline=True, before_epoch=set_size)
    for backend in rows.args.backends:
        rows.time("progressive", f"fastcore_ops {backend} (decodes at the scheduled size)",
                  rows.ours(rows.args.data, backend, False, progressive_resize=schedule, epochs=epochs), False)


def _prepared(data: Path, folder: Path) -> tuple[Path, Path]:
    """The dataset as shards and as a folder of the same shrunk JPEGs, made once under ``folder``."""
    claim_folder(folder, "benchmarks")
    shards = prepare_shards(data, folder / "shards", PREPARED, progress=True).parent
    copy = folder / "imagefolder"
    if not (copy / ".complete").is_file():
        samples, classes = find_samples(data)
        for path, label in samples:
            target = copy / classes[label] / (Path(path).stem + ".jpg")
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                target.write_bytes(shrunk_jpeg(Path(path).read_bytes(), PREPARED.max_side, PREPARED.quality))
            except Exception:  # noqa: BLE001  (an unreadable photo is left out, as prepare does)
                continue
        (copy / ".complete").touch()
    return shards, copy


def _shards(rows: _Rows, shards: Path, copy: Path) -> None:
    rows.time("shards", "torchvision (original folder)", rows.torchvision(rows.args.data, False), False, baseline=True)
    rows.time("shards", "torchvision (prepared folder, max side 256)", rows.torchvision(copy, False), False)
    for backend in rows.args.backends:
        rows.time("shards", f"fastcore_ops {backend} (prepared shards, max side 256)",
                  rows.ours(shards, backend, False), False)


def _print_table(rows: list[dict], columns: list[tuple[str, str, str]]) -> None:
    widths = [max(len(title), *(len(format(r[key], spec)) for r in rows)) for key, title, spec in columns]
    print("  ".join(title.ljust(w) for (_, title, _), w in zip(columns, widths)))
    print("-" * (sum(widths) + 2 * len(widths)))
    for r in rows:
        print("  ".join(format(r[key], spec).ljust(w) for (key, _, spec), w in zip(columns, widths)))


def _plot(rows: list[dict], path: Path, title: str) -> None:
    """One panel per section: images/s per loader, torchvision grey, ours green, each ratio written."""
    from fastcore_ops.training.figures import plt, save_figure

    sections = list(dict.fromkeys(r["section"] for r in rows))
    heights = [sum(r["section"] == section for r in rows) for section in sections]
    fig, axes = plt.subplots(len(sections), 1, figsize=(9, 0.42 * sum(heights) + 1.0 * len(sections)),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    for ax, section in zip(axes[:, 0], sections):
        part = [r for r in rows if r["section"] == section]
        colors = ["tab:gray" if r["loader"].startswith("torchvision") else "tab:green" for r in part]
        ax.barh([r["loader"] for r in part], [r["images_per_s"] for r in part], color=colors)
        for i, r in enumerate(part):
            ax.text(r["images_per_s"], i, f" {r['images_per_s']:.0f}  ({r['vs_baseline']:.2f}x)", va="center")
        ax.invert_yaxis()
        ax.set_title(section, loc="left", fontsize=10)
        ax.margins(x=0.3)
    axes[-1, 0].set_xlabel("images / s (higher is better)")
    fig.suptitle(title)
    fig.tight_layout()
    save_figure(fig, path)


def run(args: argparse.Namespace) -> None:
    """Time every table ``args`` (``python -m benchmarks.dataloader``'s, checked) asks for, print them and write
    them to ``--out``."""
    device = torch.device(args.device)
    sections = args.sections
    claim_folder(args.out, "benchmarks")  # the shards section prepares its data under it as it goes
    print(f"Device: {device_name(device)}; {args.data}; {args.image_size} px, batch {args.batch_size}, "
          f"{args.workers} workers, {args.epochs} timed epochs after a warm-up")
    rows = _Rows(args, device)
    if "fixed" in sections:
        _fixed_size(rows, "fixed")
    if "progressive" in sections:
        _progressive(rows)
    if "shards" in sections:
        _shards(rows, *_prepared(args.data, args.prepared))
    if "loaded" in sections:
        with one_core_busy():
            _fixed_size(rows, "fixed, one core busy")
    _print_table(rows.rows, [("section", "table", ""), ("loader", "loader", ""), ("images_per_s", "images/s", ".1f"),
                             ("vs_baseline", "vs torchvision", ".2f"), ("images", "images timed", "d")])

    files = [Path(path) for path, _ in find_samples(args.data)[0]]  # what the loaders read: regular files only
    breakdown = _breakdown(files, args.image_size, args.batch_size, device)
    print("\nWhere one image's time goes (single-threaded, best of 3, ms per image):")
    _print_table(breakdown, [("stage", "stage", ""), ("path", "loader", ""), ("ms_per_image", "ms / image", ".3f")])

    feed = None
    if device.type == "cuda" and "dali" in args.backends:
        feed = _feeds_resnet50(args.data, device, args.workers, args.epochs)
        print(f"\nResNet-50 at 224 px trains at {feed['resnet50_train_images_per_s']:.0f} images/s here; the dali "
              f"backend delivers {feed['dali_224_images_per_s']:.0f} images/s at 224 px: "
              f"{100 * min(1.0, feed['fed_fraction']):.0f}% of what the model can consume.")
    else:
        print("\nNo GPU here: whether DALI's GPU decoding keeps ResNet-50 fed at 224 px is measured only on a GPU.")

    meta = {"device": device_name(device), "data": str(args.data), "image_size": args.image_size,
            "batch": args.batch_size, "workers": args.workers, "epochs": args.epochs}
    (args.out / "dataloader.json").write_text(json.dumps(
        {"meta": meta, "rows": rows.rows, "breakdown": breakdown, "resnet50_feed": feed}, indent=2))
    with open(args.out / "dataloader.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows.rows[0]))
        writer.writeheader()
        writer.writerows(rows.rows)
    _plot(rows.rows, args.out / "dataloader.png", f"Training loaders, {args.image_size} px, batch {args.batch_size}, "
                                                  f"{device_name(device)}")
    print(f"Wrote {args.out / 'dataloader.csv'}, {args.out / 'dataloader.json'} and {args.out / 'dataloader.png'}")
