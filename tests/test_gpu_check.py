"""The GPU check in its small mode (the suite's machines have no GPU): every part reports, a failing one alone."""

import contextlib
import json
import signal
import subprocess
import sys
import time

import pytest

from benchmarks.gpu_check import parts as gpu_check_parts
from benchmarks.gpu_check.__main__ import main, run_part
from benchmarks.gpu_check.parts import PARTS, Mode, Part


def _stand_in(name: str, budget: float = 60) -> Part:
    return Part(name, f"the {name} part", f"tests.gpu_check_parts.{name}", budget_s=budget, small_budget_s=budget)


@contextlib.contextmanager
def both_cores_busy():
    """Two processes spinning for as long as the block runs, as other work on a shared machine would."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def test_the_small_mode_runs_every_part_and_says_so_first(tmp_path, capsys):
    """On a busy machine too: in small mode no part is stopped for being slow, and every part reports in full."""
    with both_cores_busy():
        assert main(["--out", str(tmp_path), "--small"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("gpu_check: small mode (--small): Triton's interpreter on the CPU")
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert report["mode"] == "small" and report["environment"]["torch"]
    parts = {part["name"]: part for part in report["parts"]}
    assert list(parts) == [part.name for part in PARTS] and all(part["status"] == "ok" for part in parts.values())
    checked = parts["correctness"]["rows"]
    assert {row["kernel"] for row in checked} == {"blurpool2d", "blur_maxpool2d", "bce_with_logits",
                                                  "ghost_batch_norm", "alibi_attention"}
    assert {row["dtype"] for row in checked} == {"float32", "float16"} and all(row["passed"] for row in checked)
    timed = parts["kernels"]["rows"]
    assert {row["kernel"] for row in timed} == {row["kernel"] for row in checked}
    assert all(row["ours_fwd_bwd_ms"] > 0 and row["meets_goal"] is None for row in timed)
    surgeries = parts["surgery"]["rows"]
    assert {row["surgery"] for row in surgeries} >= {"(none)", "blurpool", "alibi"}
    assert all(row["throughput"] > 0 for row in surgeries)
    loaders = [row["loader"] for row in parts["loader"]["rows"]]
    assert loaders[0].startswith("torchvision") and any(name.startswith("ours (pil)") for name in loaders)
    assert all(row["images"] > 0 for row in parts["loader"]["rows"])
    recipes = {row["recipe"]: row for row in parts["training"]["rows"]}
    assert list(recipes) == ["resnet50_baseline", "resnet50_mild", "gpt_baseline", "gpt_alibi"]
    assert recipes["gpt_alibi"]["against"] == "gpt_baseline" and recipes["gpt_alibi"]["items_per_second"] > 0
    markdown = (tmp_path / "gpu_check.md").read_text()
    assert all(f". {part.title}" in markdown for part in PARTS)
    assert (tmp_path / "kernels.png").stat().st_size > 10_000


def test_a_part_that_fails_or_overruns_is_recorded_and_the_others_still_report(tmp_path, capsys):
    parts = [_stand_in("raises"), _stand_in("hangs", budget=0.8), _stand_in("reports")]
    assert main(["--out", str(tmp_path)], parts=parts) == 1
    results = {part["name"]: part for part in json.loads((tmp_path / "gpu_check.json").read_text())["parts"]}
    assert results["raises"]["status"] == "failed"
    assert results["raises"]["error"] == "RuntimeError: this part broke on purpose"
    assert results["raises"]["rows"] == [{"checked": "before the failure"}]
    assert results["hangs"]["status"] == "over budget" and 8 <= results["hangs"]["seconds"] < 30
    # The row it writes first is kept; on a box busy enough to hold its start-up past the limit there is none.
    written = len(results["hangs"]["rows"])
    assert results["hangs"]["rows"] == [{"checked": "before it hangs"}] * written
    assert results["hangs"]["error"] == f"stopped at its limit of 8 s after {written} row{'s' * (written != 1)}"
    assert results["reports"]["status"] == "ok" and results["reports"]["notes"] == ["A note under the table."]
    markdown = (tmp_path / "gpu_check.md").read_text()
    assert "**failed** in" in markdown and "this part broke on purpose" in markdown and "**over budget**" in markdown
    assert "| before the failure |" in markdown and "A note under the table." in markdown
    assert "  raises: failed" in capsys.readouterr().out


def test_a_small_mode_part_past_its_budget_is_noted_not_stopped(tmp_path, monkeypatch):
    """In small mode a budget is what a part takes on two idle cores: a slower machine is noted, not failed."""
    monkeypatch.setattr(gpu_check_parts, "SMALL_MODE_HEADROOM", 60_000)  # a limit of 600 s: only a hang stops it
    assert main(["--out", str(tmp_path), "--small"], parts=[_stand_in("reports", budget=0.01)]) == 0
    (result,) = json.loads((tmp_path / "gpu_check.json").read_text())["parts"]
    assert result["status"] == "ok" and result["past_budget"] and "error" not in result
    assert "**ok** in" in (tmp_path / "gpu_check.md").read_text()
    assert "(past its budget: a slower or busier machine" in (tmp_path / "gpu_check.md").read_text()


@pytest.mark.parametrize("arguments, message", [
    (["--parts", "correctnes"], "--parts correctnes: no such part; did you mean correctness?"),
    (["--out", "{stranger}"], "holds files that python -m benchmarks.gpu_check did not write"),
])
def test_a_refused_check_says_why_in_one_line_and_writes_nothing(arguments, message, tmp_path, capsys):
    stranger = tmp_path / "stranger"
    stranger.mkdir()
    (stranger / "notes.txt").write_text("mine")
    out = tmp_path / "out"
    arguments = [argument.format(stranger=stranger) for argument in arguments]
    assert main(arguments if "--out" in arguments else [*arguments, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err
    assert not out.exists() and [path.name for path in stranger.iterdir()] == ["notes.txt"]


def test_a_stopped_check_stops_the_part_it_was_running(tmp_path, monkeypatch):
    """Ctrl-C while a part runs: the part runs in a session of its own, so the check must stop it itself."""
    started = []
    communicate = subprocess.Popen.communicate

    def interrupted(process, *args, timeout=None, **kwargs):
        if timeout is None:
            return communicate(process, *args, **kwargs)
        started.append(process)
        time.sleep(2)  # the part is under way
        raise KeyboardInterrupt

    monkeypatch.setattr(subprocess.Popen, "communicate", interrupted)
    (tmp_path / "parts").mkdir()
    with pytest.raises(KeyboardInterrupt):
        run_part(_stand_in("hangs"), Mode(small=True), tmp_path / "parts")
    assert started[0].wait(timeout=10) == -signal.SIGKILL


def test_correctness_checks_every_kernel_in_every_dtype_before_any_second_case():
    import torch

    from benchmarks.gpu_check.correctness import all_cases, breadth_first

    cases, dtypes = all_cases(small=False), (torch.float32, torch.float16, torch.bfloat16)
    order = breadth_first(cases, dtypes)
    assert sorted((id(case), str(dtype)) for case, dtype in order) == sorted(
        (id(case), str(dtype)) for case in cases for dtype in dtypes)
    kernels = {case.kernel for case in cases}
    first = order[:len(kernels) * len(dtypes)]
    assert {(case.kernel, dtype) for case, dtype in first} == {(k, dtype) for k in kernels for dtype in dtypes}


def test_each_goal_that_holds_at_a_size_gets_its_ratio_and_verdict():
    import torch

    from benchmarks.gpu_check.kernel_speed import goal_columns
    from benchmarks.kernels import alibi, bce

    few_classes, many_classes = bce.cases(256, torch.float16, torch.device("cpu"))[:2]
    row = {"ref_fwd_bwd_ms": 2.0, "ours_fwd_bwd_ms": 1.0}
    assert goal_columns(few_classes, row, small=False) == {"ref_ratio": 2.0, "ref_met": True, "goal": 1.0,
                                                           "meets_goal": True}
    assert goal_columns(many_classes, row, small=False) == {"ref_ratio": 2.0, "ref_met": False, "goal": 3.0,
                                                            "meets_goal": False}
    assert goal_columns(many_classes, row, small=True) == {"ref_ratio": 2.0, "ref_met": None, "goal": 3.0,
                                                           "meets_goal": None}
    # ALiBi at T = 2048 without FlexAttention timed: that goal is not judged, so neither is the whole.
    long = alibi.cases(1, torch.float16, torch.device("cuda"))[1]
    columns = goal_columns(long, {"sdpa_fwd_bwd_ms": 0.8, "ours_fwd_bwd_ms": 1.0}, small=False)
    assert columns == {"flex_ratio": None, "flex_met": None, "sdpa_ratio": 0.8, "sdpa_met": True, "goal": None,
                       "meets_goal": None}
