"""The kernel benchmark runs end to end on a small size and writes its outputs."""

import csv
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from benchmarks import timing
from benchmarks.kernels import blurpool
from benchmarks.kernels.__main__ import main
from benchmarks.kernels.runner import measure

ROOT = Path(__file__).resolve().parents[1]


def test_measure_reports_reference_time_and_traffic_model():
    case = blurpool.blur_maxpool_cases(batch=1, dtype=torch.float32, device=torch.device("cpu"))[-1]
    row = measure(case, torch.device("cpu"), time_ours=False)
    assert row["ref_fwd_ms"] > 0 and row["ref_fwd_bwd_ms"] > 0
    assert row["fwd_bwd_traffic_ratio"] == case.reference_traffic.forward_backward / case.ours_traffic.forward_backward
    assert row["fwd_bwd_traffic_ratio"] > 2  # the fused max pool skips the pooled image and int64 indices
    assert row["ref_fwd_bwd_host_ms"] is None  # on CUDA only: on a CPU the host's time is the call's


def test_the_host_time_on_cuda_is_a_call_s_own_with_the_device_s_queue_emptied_before_it(monkeypatch):
    """benchmarks.timing.host_time_ms, run here with CUDA's synchronisation stood in for: the least of the calls'
    CPU times, the queue emptied before each call and after the last, outside the timed calls."""
    events = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: events.append("synchronize"))

    def call():
        events.append("call")
        sum(range(100_000))

    assert timing.host_time_ms(call, torch.device("cuda"), calls=3) > 0
    assert events == ["synchronize", "call"] * 3 + ["synchronize"]


def test_every_kernel_has_goals_against_rivals_its_gpu_cases_time():
    """Built for CUDA (building cases touches no device), each kernel's cases time every rival a goal names."""
    from benchmarks.kernels.registry import KERNELS

    for spec in KERNELS:
        assert spec.goals, spec.name
        cases = spec.benchmark_cases(256, torch.float16, torch.device("cuda"), False)
        for goal in spec.goals:
            reached = [case for case in cases if goal.applies_to(case)]
            assert reached, (spec.name, goal.text)
            assert goal.metric in ("fwd_bwd_ms", "peak_MB"), (spec.name, goal.text)
            timed = ("ref", "floor") if goal.metric == "fwd_bwd_ms" else ("ref",)  # no floor for memory
            assert all(goal.rival in timed or goal.rival in case.others for case in reached), (spec.name, goal.text)
        for case in cases:  # one column pair per goal and case
            names = [goal.name for goal in spec.goals if goal.applies_to(case)]
            assert len(set(names)) == len(names), (spec.name, case.size)


def test_gpu_only_rivals_stay_off_the_cpu():
    """torch.compile takes seconds a shape, and FlexAttention's backward needs CUDA: neither is timed on a CPU."""
    from benchmarks.kernels.registry import KERNELS

    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    for spec in KERNELS:
        on_cpu = {name for case in spec.benchmark_cases(1, torch.float32, cpu, True) for name in case.others}
        on_gpu = {name for case in spec.benchmark_cases(256, torch.float16, cuda, False) for name in case.others}
        assert not on_cpu & {"compiled", "flex"} and on_cpu <= on_gpu, spec.name
    compiled = {spec.name for spec in KERNELS
                if all("compiled" in case.others for case in spec.benchmark_cases(256, torch.float16, cuda, False))}
    assert compiled == {"blurpool2d", "blur_maxpool2d", "bce_with_logits", "ghost_batch_norm"}


def test_ghost_batch_norm_is_timed_against_full_batch_batch_norm():
    from benchmarks.kernels import ghost_batchnorm

    case = ghost_batchnorm.cases(4, torch.float32, torch.device("cpu"), tiny=True)[0]
    x, weight, bias, mean, var = case.make_inputs()
    expected = torch.nn.functional.batch_norm(x, mean.clone(), var.clone(), weight, bias, True)
    torch.testing.assert_close(case.others["batch_norm"](x, weight, bias, mean, var), expected)
    row = measure(case, torch.device("cpu"), time_ours=False, cpu_budget_s=0.0)
    assert row["batch_norm_fwd_bwd_ms"] > 0 and "floor_fwd_bwd_ms" not in row  # no peak bandwidth on a CPU


def test_bce_times_index_targets_first_at_both_vocabularies():
    from benchmarks.kernels import bce

    cases = bce.cases(256, torch.float16, torch.device("cpu"))
    assert [case.size for case in cases] == ["2048x1000 labels", "2048x32000 labels", "2048x1000 mixed",
                                             "2048x32000 mixed"]
    asked = [[goal.at_least for goal in bce.SPEC.goals if goal.applies_to(case)] for case in cases[:2]]
    assert asked == [[1.0], [3.0]]


def test_alibi_is_judged_against_sdpa_from_2048():
    from benchmarks.kernels import alibi

    cases = alibi.cases(1, torch.float16, torch.device("cuda"))
    assert [case.shape[2] for case in cases] == [512, 2048, 4096]
    judged = [[goal.rival for goal in alibi.SPEC.goals if goal.applies_to(case)] for case in cases]
    assert judged == [["flex"], ["flex", "sdpa"], ["flex", "sdpa"]]


def test_profile_names_each_case_and_the_ops_it_ran(tmp_path, capsys):
    main(["--device", "cpu", "--batch-size", "1", "--kernels", "blur_maxpool2d", "--profile", "--out", str(tmp_path)])
    profile = (tmp_path / "profile.txt").read_text()
    # On a CPU only the reference is timed: the max pool and the depthwise convolution it runs, forward and backward.
    assert profile.count("blur_maxpool2d 1x64x112x112") == 2 and ": ref, 5 forward+backward passes" in profile
    assert "aten::max_pool2d" in profile and "aten::convolution" in profile


def test_main_writes_table_csv_json_and_plot(tmp_path, capsys):
    main(["--device", "cpu", "--batch-size", "1", "--kernels", "blurpool2d,blur_maxpool2d", "--out", str(tmp_path)])
    printed = capsys.readouterr().out
    assert "No GPU here" in printed and "blur_maxpool2d" in printed
    rows = json.loads((tmp_path / "kernels.json").read_text())["rows"]
    assert {row["kernel"] for row in rows} == {"blurpool2d", "blur_maxpool2d"}
    with open(tmp_path / "kernels.csv") as f:
        assert len(list(csv.DictReader(f))) == len(rows)
    assert (tmp_path / "kernels.png").stat().st_size > 0


def test_alibi_cases_time_sdpa_paths_and_model_linear_memory(monkeypatch):
    from benchmarks.kernels import alibi

    monkeypatch.setattr(alibi, "CPU_LENGTHS", (64, 128))
    short, long = alibi.cases(1, torch.float32, torch.device("cpu"))
    # Ours keeps one log-sum-exp per row: linear in T. The reference stores T² scores: quadratic.
    assert long.ours_traffic.temporaries == 2 * short.ours_traffic.temporaries
    assert long.reference_traffic.temporaries > 3.9 * short.reference_traffic.temporaries
    # Causal pairs of T=64: 64·65/2 per head; fwd FLOPs 4·pairs·D.
    assert short.flops[0] == 4 * 12 * (64 * 65 // 2) * 64
    row = measure(short, torch.device("cpu"), time_ours=False)
    for path in ("ref", "sdpa", "sdpa_bias"):
        assert row[f"{path}_fwd_bwd_ms"] > 0 and row[f"{path}_fwd_bwd_TFLOPs"] > 0


def test_alibi_sdpa_bias_path_matches_the_reference():
    from benchmarks.kernels import alibi

    q, k, v = (torch.randn(2, 12, 40, 64) for _ in range(3))
    reference = alibi.alibi_attention_reference(q, k, v, is_causal=True)
    torch.testing.assert_close(alibi._sdpa_with_bias(q, k, v), reference, atol=1e-5, rtol=1e-5)


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
@pytest.mark.parametrize("length_q, length_k", [(40, 40), (24, 56)])
def test_the_flex_attention_path_computes_alibi_attention(length_q, length_k):
    """Eager here: FlexAttention's backward does not run on a CPU, so the benchmark times it on CUDA only."""
    from benchmarks.kernels import alibi

    q = torch.randn(1, 12, length_q, 64)
    k, v = (torch.randn(1, 12, length_k, 64) for _ in range(2))
    reference = alibi.alibi_attention_reference(q, k, v, is_causal=True)
    torch.testing.assert_close(alibi.flex_alibi(q, k, v, compiled=False), reference, atol=1e-5, rtol=1e-5)
    assert "flex" not in alibi.cases(1, torch.float32, torch.device("cpu"), tiny=True)[0].others


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
def test_alibi_rivals_make_their_slopes_once(monkeypatch):
    """Slopes made per call are a host-to-device copy on CUDA, which stopped the reference's and FlexAttention's
    CUDA-graph capture on the H200: each rival makes them once, as a user's module would."""
    from benchmarks.kernels import alibi
    from fastcore_ops.kernels import alibi as kernel_module

    made, original = [], kernel_module.alibi_slopes

    def counted(heads, device=None):
        made.append(heads)
        return original(heads, device)

    monkeypatch.setattr(kernel_module, "alibi_slopes", counted)
    monkeypatch.setattr(alibi, "alibi_slopes", counted)
    q, k, v = (torch.randn(1, 12, 24, 16) for _ in range(3))
    rivals = (alibi._reference, alibi._sdpa_with_bias, lambda q, k, v: alibi.flex_alibi(q, k, v, compiled=False))
    for rival in rivals:
        rival(q, k, v)  # warm: what is cached is made here
        made.clear()
        rival(q, k, v)
        assert made == []


def _stranger(folder):
    folder.mkdir()
    (folder / "kernels.csv").write_text("a table of my own")
    return folder


@pytest.mark.parametrize("command, arguments, message", [
    ("kernels", ["--batch-size", "0"], "argument --batch-size: must be a whole number >= 1, got '0'"),
    ("kernels", ["--kernels", "blurpol2d"], "--kernels blurpol2d: no such kernel; did you mean blurpool2d?"),
    ("kernels", ["--device", "tpu9"], "argument --device: 'tpu9' is not a device name"),
    ("kernels", ["--dtype", "float8"], "argument --dtype: invalid choice: 'float8'"),
    ("kernels", ["--out", "{stranger}"], "holds files that python -m benchmarks did not write"),
    ("surgery", ["--models", "resnet9000"], "--models resnet9000: no such model; did you mean resnet50?"),
    ("surgery", ["--steps", "-1"], "argument --steps: must be a whole number >= 1, got '-1'"),
    ("surgery", ["--out", "{stranger}"], "holds files that python -m benchmarks did not write"),
    ("dataloader", ["--data", "{missing}"], "is not a folder; pass an ImageFolder tree"),
    ("dataloader", ["--sections", "fixed,slow"],
     "--sections slow: no such section; known: fixed, progressive, shards, loaded"),
    ("dataloader", ["--backends", "pil,ffcv"], "--backends ffcv: no such backend; known: pil, dali"),
    ("dataloader", ["--prepared", "{stranger}"], "holds files that python -m benchmarks did not write"),
    ("dataloader", ["--unknown-flag"], "unrecognized arguments: --unknown-flag"),
    ("peers", ["--recipe", "gpt_baseline"], "has task 'language_model': the Composer job sets up image classification"),
    ("peers", ["--pairs", "0"], "argument --pairs: must be a whole number >= 1, got '0'"),
    ("peers", ["--data", "{missing}"], "is not a folder; give one with train/ and val/"),
    ("peers", ["--out", "{stranger}"], "holds files that python -m benchmarks.peers did not write"),
    ("step_floor", ["--recipe", "cifar_mild", "--data", "{missing}"], "no such folder; pass a folder holding train/"),
    # Each recipe's task checks its own data: a language model's is a folder of text.
    ("step_floor", ["--recipe", "gpt_baseline", "--data", "{missing}"], "source must be an existing folder of text"),
    ("composer_job", ["--recipe", "cifar_mild", "--data", "{missing}", "--peers", "{missing}"],
     "holds no composer package; install it there with `make peers`"),
    ("peers", ["--peer", "airbench", "--airbench-epochs", "0"], "argument --airbench-epochs: must be a number > 0"),
    ("peers", ["--airbench-batch-size", "10"], "set airbench's run; this is --peer composer"),
    ("airbench_job", ["--data", "{missing}", "--peers", "{missing}"],
     "holds no airbench package; install it there with `make peers`"),
])
def test_a_refused_benchmark_says_why_in_one_line_and_writes_nothing(command, arguments, message, tmp_path, capsys):
    stranger, out = _stranger(tmp_path / "stranger"), tmp_path / "out"
    arguments = [a.format(stranger=stranger, missing=tmp_path / "missing") for a in arguments]
    if "--out" not in arguments:
        arguments += ["--out", str(out)]
    main_of = importlib.import_module(f"benchmarks.{command}" + (".__main__" if command == "kernels" else "")).main
    assert main_of(arguments) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err
    assert not out.exists() and sorted(p.name for p in stranger.iterdir()) == ["kernels.csv"]


def test_measure_reports_device_columns_none_on_the_cpu_and_counts_launches():
    """The device's own time needs CUDA (None here); the launches of one forward+backward are counted anywhere."""
    from benchmarks.kernels.registry import KERNELS

    spec = next(spec for spec in KERNELS if spec.name == "blurpool2d")
    case = spec.benchmark_cases(1, torch.float32, torch.device("cpu"), True)[0]
    row = measure(case, torch.device("cpu"), time_ours=True, cpu_budget_s=0.0)
    for path in ("ref", "ours"):
        assert row[f"{path}_fwd_bwd_ms"] > 0  # eager, host included
        for column in ("graph_ms", "l2_warm_ms", "l2_cold_ms", "kernels_ms", "kernels", "graph_error"):
            assert row[f"{path}_fwd_bwd_{column}"] is None, column
        assert row[f"{path}_fwd_bwd_launches"] > 0
    assert row["fwd_bwd_graph_speedup"] is None


def test_device_columns_leave_launches_unknown_for_a_higher_order_op():
    """FlexAttention refuses the launch recorder's dispatch mode: the column is None, not a failed benchmark (on
    the H200 it stopped the ALiBi timing). Forward alone: FlexAttention has no backward on the CPU."""
    from torch.nn.attention.flex_attention import flex_attention

    from benchmarks.kernels.runner import _device_columns

    q = torch.randn(1, 2, 16, 8)
    columns = _device_columns("flex", lambda: flex_attention(q, q, q), torch.device("cpu"))
    assert columns["flex_fwd_bwd_launches"] is None
    assert columns["flex_fwd_bwd_graph_ms"] is None  # no CUDA here
    # Compiled, the rival refuses before Dynamo meets the recorder's mode: there its failure outlived the call.
    from benchmarks.kernels import alibi
    from fastcore_ops.kernels.launches import LaunchRecorder

    with pytest.raises(NotImplementedError, match="dispatch mode"), LaunchRecorder():
        alibi.flex_alibi(q, q, q)


def test_retune_refuses_without_cuda_and_leaves_the_table(monkeypatch, tmp_path, capsys):
    from benchmarks.kernels import retune

    table = tmp_path / "tuned_configs.json"
    table.write_text('{"kept": {}}\n')
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert retune.main(["--out", str(table)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: retuning times the kernels on a GPU") and err.count("\n") == 1, err
    assert table.read_text() == '{"kept": {}}\n' and sorted(p.name for p in tmp_path.iterdir()) == [table.name]


def test_retune_refuses_to_list_and_tune_at_once(tmp_path, capsys):
    from benchmarks.kernels import retune

    assert retune.main(["--out", str(tmp_path / "table.json"), "--missing", "--only-new"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --missing lists") and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []


def test_retune_refuses_an_unknown_dtype_and_writes_nothing(tmp_path, capsys):
    from benchmarks.kernels import retune

    assert retune.main(["--out", str(tmp_path / "table.json"), "--dtypes", "float16,float8"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --dtypes") and "float8" in err and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []


def test_retune_replaces_the_keys_it_meets_and_keeps_the_others(monkeypatch, tmp_path, capsys):
    """The tuning itself needs a GPU (tests/kernels/test_backend.py times configs with a stand-in); here, what
    retune does with its choices."""
    from benchmarks.kernels import retune, tuning
    from fastcore_ops.kernels import backend

    entry = {"kwargs": {"BLOCK_C": 1024}, "num_warps": 4, "num_stages": 3}
    table = tmp_path / "tuned_configs.json"
    table.write_text(json.dumps({"_bce_forward_kernel": {"(1024, True)": entry, "(2048, True)": entry}}))
    chosen = {**entry, "num_warps": 8}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda: "a stand-in GPU")
    monkeypatch.setattr(backend, "INTERPRETING", False)
    monkeypatch.setattr(backend, "AUTOTUNE_MODE", "table")
    asked = []
    monkeypatch.setattr(tuning, "tune_kernels", lambda names, *args: asked.append(names) or {
        "_bce_forward_kernel": {"(2048, True)": chosen}, "_scale_kernel": {"(4,)": chosen}})
    assert retune.main(["--out", str(table), "--kernels", "bce_with_logits"]) == 0
    assert asked == [["bce_with_logits"]]
    assert backend.load_tuned_configs(table) == {
        "_bce_forward_kernel": {"(1024, True)": entry, "(2048, True)": chosen}, "_scale_kernel": {"(4,)": chosen}}
    assert "2 keys of 2 autotuned kernels tuned on a stand-in GPU" in capsys.readouterr().out


def test_retune_only_new_times_the_keys_the_table_lacks_and_writes_those(monkeypatch, tmp_path, capsys):
    from benchmarks.kernels import retune, tuning
    from fastcore_ops.kernels import backend

    entry = {"kwargs": {"BLOCK_C": 1024}, "num_warps": 4, "num_stages": 3}
    table = tmp_path / "tuned_configs.json"
    table.write_text(json.dumps({"_bce_forward_kernel": {"(1024, True)": entry}}))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda: "a stand-in GPU")
    monkeypatch.setattr(backend, "INTERPRETING", False)
    monkeypatch.setattr(backend, "AUTOTUNE_MODE", "table")
    monkeypatch.setattr(tuning, "kept_configs", lambda table, path: {"_bce_forward_kernel": {(1024, True): "kept"}})
    given = []
    new = {**entry, "num_warps": 8}
    monkeypatch.setattr(tuning, "tune_kernels", lambda names, batch, dtypes, device, kept: given.append(kept) or {
        "_bce_forward_kernel": {"(1024, True)": entry, "(2048, True)": new}})
    assert retune.main(["--out", str(table), "--kernels", "bce_with_logits", "--only-new"]) == 0
    assert given == [{"_bce_forward_kernel": {(1024, True): "kept"}}]
    assert backend.load_tuned_configs(table) == {"_bce_forward_kernel": {"(1024, True)": entry, "(2048, True)": new}}
    assert "1 keys of 1 autotuned kernels tuned on a stand-in GPU (batch 256, float16,bfloat16; only keys the table " \
           "lacked)" in capsys.readouterr().out


def test_retune_keeps_each_key_of_the_table_as_its_autotuner_files_it(tmp_path):
    """kept_configs, compiled (the interpreter's kernels have one config each): every key of the committed table
    becomes the tuple its autotuner's cache holds, with the config the table names; a key that is no tuple is
    refused, naming the file."""
    from fastcore_ops.kernels import backend

    env = {k: v for k, v in os.environ.items()
           if k not in ("TRITON_INTERPRET", "FASTCORE_OPS_INTERPRET", backend.AUTOTUNE_VARIABLE)}
    bad = tmp_path / "tuned_configs.json"
    committed = backend.load_tuned_configs(backend.TUNED_CONFIGS)
    name, entries = next(iter(committed.items()))
    bad.write_text(json.dumps({name: {"__import__('os')": next(iter(entries.values()))}}))
    code = f"""
import json
from pathlib import Path
from benchmarks.kernels.tuning import kept_configs
from fastcore_ops.kernels import backend
kept = kept_configs(backend.load_tuned_configs(backend.TUNED_CONFIGS), backend.TUNED_CONFIGS)
print(json.dumps({{name: {{str(key): backend.config_entry(config) for key, config in configs.items()}}
                  for name, configs in kept.items() if configs}}))
try:
    kept_configs(backend.load_tuned_configs(Path({str(bad)!r})), Path({str(bad)!r}))
except ValueError as error:
    print(error)
"""
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-4000:]
    kept, refusal = result.stdout.splitlines()
    assert json.loads(kept) == committed
    assert refusal.startswith(f"{bad}: {name}: key") and "is not a tuning key's tuple" in refusal


def test_retune_lists_without_a_gpu_the_keys_the_table_lacks_and_changes_nothing(tmp_path):
    """--missing, compiled (the interpreter's kernels have one config and no key): the keys BCE's benchmark cases
    meet, found on fake CUDA tensors, against a table missing one of them."""
    from fastcore_ops.kernels import backend

    committed = backend.load_tuned_configs(backend.TUNED_CONFIGS)
    dropped = sorted(committed["_bce_forward_kernel"])[0]
    table = tmp_path / "tuned_configs.json"
    table.write_text(json.dumps({name: {key: entry for key, entry in entries.items() if key != dropped}
                                 for name, entries in committed.items()}))
    before = table.read_bytes()
    env = {k: v for k, v in os.environ.items()
           if k not in ("TRITON_INTERPRET", "FASTCORE_OPS_INTERPRET", backend.AUTOTUNE_VARIABLE)}
    result = subprocess.run([sys.executable, "-m", "benchmarks.kernels.retune", "--missing", "--kernels",
                             "bce_with_logits", "--out", str(table)], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-4000:]
    met = len(committed["_bce_forward_kernel"])  # the committed table holds every key the cases meet
    assert result.stdout.splitlines() == [f"bce_with_logits: _bce_forward_kernel: {met - 1} of {met} keys in the table",
                                          f"    missing {dropped}", "RETUNE_KERNELS=bce_with_logits"], result.stdout
    assert table.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == [table.name]


def test_retune_refuses_to_list_missing_keys_under_the_interpreter(tmp_path, capsys):
    from benchmarks.kernels import retune

    table = tmp_path / "tuned_configs.json"
    table.write_text("{}\n")
    assert retune.main(["--missing", "--out", str(table)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: Triton's interpreter is on") and err.count("\n") == 1, err
    assert table.read_text() == "{}\n"


def _h200_row(**columns):
    """A row as ``python -m benchmarks.kernels --jsonl`` writes it on a GPU (blur-max-pool's, the H200's figures)."""
    return {"device": "NVIDIA H200", "batch": 256, "dtype": "torch.float16", "kernel": "blur_maxpool2d",
            "size": "256x64x112x112 nhwc", "ref_fwd_bwd_ms": 8.92, "ref_fwd_bwd_graph_ms": 8.91,
            "ours_fwd_bwd_ms": 1.03, "ours_fwd_bwd_graph_ms": 1.03, "ref_peak_MB": 2450.0, "ours_peak_MB": 1078.0,
            **columns}


def test_goals_judge_eager_and_device_time_and_the_last_row_counts(tmp_path, capsys):
    from benchmarks.kernels import goals

    rows = tmp_path / "kernels.jsonl"
    # The first row is measured again below: the retry counts. Its device time came from the profiler alone.
    rows.write_text("\n".join(json.dumps(row) for row in (
        _h200_row(ours_fwd_bwd_ms=9.0),
        _h200_row(ours_fwd_bwd_ms=4.0, ours_fwd_bwd_graph_ms=None, ours_fwd_bwd_kernels_ms=2.0,
                  floor_fwd_bwd_ms=0.3, ours_fwd_bwd_host_ms=0.5, ref_fwd_bwd_host_ms=0.2))) + "\n")
    out = tmp_path / "goals"
    assert goals.main([str(rows), "--out", str(out)]) == 0
    verdicts = json.loads((out / "goals.json").read_text())
    speed, memory = verdicts
    assert speed["at_least"] == 3.0 and speed["eager_ratio"] == pytest.approx(8.92 / 4.0)
    assert speed["met_eager"] is False
    assert speed["device_ratio"] == pytest.approx(8.91 / 2.0) and speed["met_on_device"] is True
    assert memory["device_ratio"] == memory["eager_ratio"] == pytest.approx(2450 / 1078)
    assert speed["host_ratio"] == pytest.approx(0.2 / 0.5) and memory["host_ratio"] is None
    # The reference's device time over ours' bytes at the peak bandwidth; memory has no such bound.
    assert speed["device_bound"] == pytest.approx(8.91 / 0.3) and memory["device_bound"] is None
    assert "2.23x **missed** | 0.40x | 4.46x met | 29.70x |" in (out / "goals.md").read_text()
    assert "2 of 2 goals met; 0 of those missed ask more than the bytes allow" in capsys.readouterr().out
    assert (out / "goals.png").stat().st_size > 0


def test_a_goal_asking_more_than_the_bytes_allow_is_named_so():
    """BlurPool at stride 1 on the H200: cuDNN moved the bytes at 55% of the peak, so 2x it needs 110%."""
    from benchmarks.kernels import goals

    verdict = {"kernel": "blurpool2d", "size": "256x128x56x56 nhwc stride 1", "goal": "2x cuDNN", "at_least": 2.0,
               "eager_ratio": 0.5, "device_ratio": 1.21, "met_eager": False, "met_on_device": False,
               "device_bound": 1.81}
    text = goals.table([verdict])
    assert "| 0.50x **missed** | - | 1.21x **missed** | 1.81x (less than asked) |" in text
    assert "0 of 1 goals met; 1 of those missed ask more than the bytes allow" in text


@pytest.mark.parametrize("line, message", [
    ("not json", "kernels.jsonl, line 1: not a JSON row"),
    (json.dumps({"kernel": "blur_maxpool2d"}), "line 1: a row needs its kernel, size, dtype and batch"),
    (json.dumps(_h200_row(kernel="blurpool3d")), "kernel blurpool3d: not a declared kernel"),
    (json.dumps(_h200_row(size="1x1x1x1 nhwc")), "of size 1x1x1x1 nhwc: not a size the benchmark declares"),
    (json.dumps(_h200_row(dtype="torch.nonsense")), "dtype torch.nonsense: not a torch dtype"),
])
def test_goals_refuse_rows_no_run_wrote_and_write_nothing(line, message, tmp_path, capsys):
    from benchmarks.kernels import goals

    rows, out = tmp_path / "kernels.jsonl", tmp_path / "goals"
    rows.write_text(line + "\n")
    assert goals.main([str(rows), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err
    assert not out.exists()


def test_each_case_compiles_its_compiled_rival_afresh_and_says_so():
    """A compiled rival, met at a second size after the first size's measurements (launch recorder included),
    compiles again: the row's compiled_graphs counts it, and 0 says a rival ran eagerly (as after the first size
    on the H200). A toy function on Dynamo's eager backend: what Inductor makes of it is not the point."""
    import dataclasses

    spec_case = blurpool.blur_maxpool_cases(batch=1, dtype=torch.float32, device=torch.device("cpu"))[-1]
    doubled = torch.compile(lambda x: x * 2, backend="eager", dynamic=False)
    rows = []
    for size in (4, 6):
        case = dataclasses.replace(spec_case, size=f"{size} px",
                                   make_inputs=lambda size=size: (torch.randn(1, 2, size, size, requires_grad=True),),
                                   others={"compiled": doubled})
        rows.append(measure(case, torch.device("cpu"), time_ours=False, cpu_budget_s=0.0))
    assert [row["compiled_graphs"] for row in rows] == [2, 2]  # a graph with grad and one without, at each size
    plain = measure(spec_case, torch.device("cpu"), time_ours=False, cpu_budget_s=0.0)
    assert plain["compiled_graphs"] == 0
