"""python -m benchmarks.dataloader runs end to end on a small tree and writes what it measured."""

import csv
import json
import os

import pytest

from benchmarks.dataloader import main
from fastcore_ops.data.sources import DatasetScanWarning


@pytest.mark.timeout(300)  # a named pipe that is opened waits for a writer forever: fail, do not hang
def test_benchmark_times_every_loader_and_writes_table_csv_json_and_plot(make_tree, photo_jpegs, tmp_path, capsys):
    photos = photo_jpegs(12)
    root = make_tree({f"class{k}": {path.name: path.read_bytes() for path in photos[k::3]} for k in range(3)})
    os.mkfifo(root / "class0" / "pipe.jpg")  # every loader and the breakdown must leave it out, unopened
    out = tmp_path / "out"
    with pytest.warns(DatasetScanWarning, match="class0/pipe.jpg': it is a named pipe"):
        main(["--data", str(root), "--device", "cpu", "--image-size", "48", "--batch-size", "4", "--epochs", "1",
              "--workers", "1", "--out", str(out)])
    printed = capsys.readouterr().out
    assert "Where one image's time goes" in printed
    rows = json.loads((out / "dataloader.json").read_text())["rows"]
    fixed = ["torchvision", "fastcore_ops pil", "fastcore_ops dali", "torchvision + RandAugment",
             "fastcore_ops pil + RandAugment", "fastcore_ops dali + RandAugment"]
    assert [(row["section"], row["loader"]) for row in rows] == [
        *(("fixed", name) for name in fixed),
        ("progressive", "torchvision (full decode, crop to the scheduled size)"),
        ("progressive", "fastcore_ops pil (decodes at the scheduled size)"),
        ("progressive", "fastcore_ops dali (decodes at the scheduled size)"),
        ("shards", "torchvision (original folder)"), ("shards", "torchvision (prepared folder, max side 256)"),
        ("shards", "fastcore_ops pil (prepared shards, max side 256)"),
        ("shards", "fastcore_ops dali (prepared shards, max side 256)"),
        *(("fixed, one core busy", name) for name in fixed)]
    for row in rows:
        assert row["images"] == 12 and row["images_per_s"] > 0  # 3 full batches of 4 per timed epoch
    # Each table's first torchvision row (with and without RandAugment) is its baseline.
    assert [row["vs_baseline"] for row in rows if row["loader"] in ("torchvision", "torchvision + RandAugment")
            or row["loader"].startswith(("torchvision (full", "torchvision (original"))] == [1.0] * 6
    assert (out / "prepared" / "shards" / "index.json").is_file()
    with open(out / "dataloader.csv") as f:
        assert len(list(csv.DictReader(f))) == len(rows)
    assert (out / "dataloader.png").stat().st_size > 0
