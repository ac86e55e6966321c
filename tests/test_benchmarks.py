"""The kernel benchmark runs end to end on a small size and writes its outputs."""

import csv
import json

import torch

from benchmarks.kernels import blurpool
from benchmarks.kernels.__main__ import main, measure


def test_measure_reports_reference_time_and_traffic_model():
    case = blurpool.cases(batch=1, dtype=torch.float32, device=torch.device("cpu"))[-1]  # blur_maxpool2d
    row = measure(case, torch.device("cpu"), time_ours=False)
    assert row["ref_fwd_ms"] > 0 and row["ref_fwd_bwd_ms"] > 0
    assert row["fwd_bwd_traffic_ratio"] == case.reference_traffic.forward_backward / case.ours_traffic.forward_backward
    assert row["fwd_bwd_traffic_ratio"] > 2  # the fused max pool skips the pooled image and int64 indices


def test_main_writes_table_csv_json_and_plot(tmp_path, capsys):
    main(["--device", "cpu", "--batch", "1", "--kernels", "blurpool2d,blur_maxpool2d", "--out", str(tmp_path)])
    printed = capsys.readouterr().out
    assert "No GPU here" in printed and "blur_maxpool2d" in printed
    rows = json.loads((tmp_path / "kernels.json").read_text())["rows"]
    assert {row["kernel"] for row in rows} == {"blurpool2d", "blur_maxpool2d"}
    with open(tmp_path / "kernels.csv") as f:
        assert len(list(csv.DictReader(f))) == len(rows)
    assert (tmp_path / "kernels.png").stat().st_size > 0
