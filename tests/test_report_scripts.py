"""Every script in reports/ runs on a tiny input and uses only the project's public names, so that none of them rots.

Python scripts run in this process through their main(argv), so imports are paid once. The shell
script and the children some scripts start run as processes of their own. Everything runs on one
thread: on a busy 2-core machine spinning OpenMP threads make each small step hundreds of times
slower.
"""

import ast
import csv
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fastcore_ops.training.compute_threads import torch_threads
from tests.data.conftest import DATASETS
from tests.hang_guard import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "reports"
CIFAR = DATASETS / "cifar10-jpeg"


def load(relative: str):
    """reports/<relative> as a module (not run: each script starts from main())."""
    name = "report_script_" + relative.replace("/", "_").replace("-", "_").removesuffix(".py")
    spec = importlib.util.spec_from_file_location(name, REPORTS / relative)
    module = importlib.util.module_from_spec(spec)
    writes_bytecode, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # no __pycache__ in reports/
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = writes_bytecode
    return module


@pytest.fixture(scope="module")
def ten_jpegs(tmp_path_factory):
    """train/ and test/ ImageFolders of the first CIFAR-10 image of each class (symlinks): 10 JPEGs each."""
    assert CIFAR.is_dir(), f"the shared CIFAR-10 images are missing: expected {CIFAR} (see the project README)"
    root = tmp_path_factory.mktemp("ten-jpegs")
    for split in ("train", "test"):
        for class_dir in sorted((CIFAR / split).iterdir()):
            (root / split / class_dir.name).mkdir(parents=True)
            image = sorted(class_dir.iterdir())[0]
            (root / split / class_dir.name / image.name).symlink_to(image)
    return root


@pytest.fixture(autouse=True)
def one_thread(monkeypatch):
    """One thread here (children have one from the root conftest.py); children find the project's packages."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    with torch_threads(1):
        yield


@pytest.fixture
def children_compute(monkeypatch):
    """Children run kernels as users do, not through Triton's interpreter (only for tests that run none here)."""
    monkeypatch.setenv("FASTCORE_OPS_INTERPRET", "0")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)


def test_crop_search_collect(tmp_path):
    runs = tmp_path / "runs"
    (runs / "m8").mkdir(parents=True)
    (runs / "m8" / "summary.json").write_text(json.dumps({"metrics": {"top1": 0.5168}, "train_seconds": 38.12,
                                                          "steps": 312}))
    (runs / "m8" / "config.json").write_text(json.dumps({"name": "cifar_mild", "schedule": {"epochs": 8.0}}))
    (runs / "log.txt").write_text("m8 | --set schedule.epochs=8 | cifar_mild: top-1 51.68% | 312 steps\n"
                                  "bad | data.x=1 | python -m fastcore_ops.training.train: error: unrecognized arguments\n")
    load("cifar-crop-search-20261124/collect.py").main(["--runs", str(runs), "--out", str(tmp_path / "out"),
                                                        "--copy-runs"])
    rows = list(csv.reader((tmp_path / "out" / "search.csv").open()))
    assert rows[1:] == [["m8", "cifar_mild", "schedule.epochs=8", "8.0", "51.68", "38.1", "312"]]
    assert (tmp_path / "out" / "runs" / "m8" / "summary.json").is_file()


def test_host_memory_run_once(tmp_path, ten_jpegs, children_compute):
    results = tmp_path / "keep.txt"
    command = [str(REPORTS / "cifar-host-memory-20261124/run_once.sh"), str(results), "--data", str(ten_jpegs),
               "--epochs", "1", "--eval-every", "0", "--set", "data.batch_size=10"]
    finished = subprocess.run(command, cwd=ROOT, env={**os.environ, "PYTHON": sys.executable}, capture_output=True,
                              text=True, timeout=HANG_GUARD_S)
    assert finished.returncode == 0, finished.stderr
    assert set(json.loads(results.read_text())) == {"train_seconds", "top1"}


@pytest.mark.parametrize("variant", ["none", "strided", "current"])
def test_mild_speed_blurpool_paths(variant, capsys):
    load("cifar-mild-speed-20261124/probes/blurpool_paths.py").main(
        [variant, "8", "--batch-size", "2", "--warmup", "1", "--steps", "1"])
    assert "ms/step" in capsys.readouterr().out


def test_mild_speed_step_time(capsys):
    load("cifar-mild-speed-20261124/probes/step_time.py").main(["cl_bf16", "8", "--batch-size", "2", "--warmup", "1",
                                                                  "--steps", "1"])
    assert "ms/step" in capsys.readouterr().out


def test_openmp_wait(capsys, children_compute):
    """Its children are the step timer, "cifar-step-compute-20261125/measure.py", one per policy and round."""
    load("cifar-openmp-wait-20261125/measure.py").main(["--rounds", "1", "--policies", "PASSIVE", "--batch-size", "2",
                                                        "--warmup", "0", "--steps", "1"])
    rows = list(csv.DictReader(capsys.readouterr().out.splitlines()))
    assert len(rows) == 10 and {row["OpenMP wait policy"] for row in rows} == {"PASSIVE"}


def test_crop_cache(ten_jpegs, capsys):
    load("crop-cache-20261125/measure.py").main([str(ten_jpegs / "train"), "--per-class", "1", "--batch-size", "5",
                                                 "--epochs", "2", "--cache-mb", "1"])
    rows = list(csv.DictReader(capsys.readouterr().out.splitlines()))
    assert [(row["crop_cache_mb"], row["epoch"]) for row in rows] == [("0", "0"), ("0", "1"), ("1", "0"), ("1", "1")]


def test_loader_per_image(ten_jpegs, capsys):
    load("loader-per-image-20261203/measure.py").main(["--data", str(ten_jpegs), "--epochs", "2", "--set",
                                                       "data.batch_size=5", "--set", "data.num_workers=0"])
    rows = list(csv.DictReader(capsys.readouterr().out.splitlines()))
    assert [(row["epoch"], row["images"]) for row in rows] == [("0", "10"), ("1", "10")]


def test_dataloader_memory_flip_time(capsys):
    load("dataloader-memory-20261124/probes/flip_time.py").main(["--batch-size", "4", "--size", "8", "--repeats", "1"])
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ["cur", "v2", "v3", "v4"]
    assert all(line.endswith("True") for line in lines)


def test_dataloader_memory_loader_epochs(ten_jpegs, capsys):
    load("dataloader-memory-20261124/probes/loader_epochs.py").main(
        [str(ten_jpegs / "train"), "--epochs", "1", "--randaugment", "--batch-size", "5", "--size", "16",
         "--workers", "0"])
    assert capsys.readouterr().out.split() == ["10"]


def test_dataloader_memory_stage_memory(capsys):
    load("dataloader-memory-20261124/probes/stage_memory.py").main(["--keep", "--batch-size", "2", "--size", "8",
                                                                    "--batches", "1"])
    assert capsys.readouterr().out.count("ms per image") == 6


def test_dataloader_memory_worker_time(ten_jpegs, capsys):
    load("dataloader-memory-20261124/probes/worker_time.py").main([str(ten_jpegs / "train"), "16", "--batch-size", "5",
                                                                   "--profile-lines", "2"])
    assert "16px:" in capsys.readouterr().out


def test_dataloader_memory_entropy_floor(ten_jpegs, capsys):
    pytest.importorskip("fastcore_ops.data.backends.workers._jpeg_region", reason="the region decoder was not built")
    load("dataloader-memory-20261124/probes/entropy_floor.py").main([str(ten_jpegs / "train"), "--repeats", "1"])
    assert capsys.readouterr().out.count("ms per photo") == 3


def test_shard_checksum(ten_jpegs, tmp_path, capsys):
    load("shard-checksum-20261125/measure.py").main(
        [str(ten_jpegs / "train"), str(tmp_path), "--per-class", "1", "--max-side", "32", "--shard-size", "5",
         "--image-size", "16", "--batch-size", "5", "--workers", "0", "--repeats", "1"])
    out = capsys.readouterr().out
    assert "10 images in 2 shards" in out and "median whole first epoch" in out


def test_token_scan(tmp_path, capsys):
    assert load("token-scan-20261125/measure.py").main(["1", str(tmp_path), "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "warm: median" in out and out.count("peak resident memory") == 2
    assert not (tmp_path / "train.bin").exists()


def test_cpu_numerics_compare_ops(capsys):
    load("cpu-numerics-20261128/compare_ops.py").main([])
    digests = json.loads(capsys.readouterr().out)
    recorded = json.loads((REPORTS / "cpu-numerics-20261128" / "xeon-amx.json").read_text())
    assert sorted(digests) == sorted(recorded) and all(len(value) == 10 for value in digests.values())


def test_demo_silences(capsys):
    command = [sys.executable, "-c", "import time; print('start', flush=True); time.sleep(0.6); print('done')"]
    assert load("demo-silence-20261128/silences.py").main(["--show", "1", "--", *command]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("exit status 0")
    assert lines[1].endswith(": done") and float(lines[1].split()[0]) > 0.5  # at least the command's own silence


PROJECT_PACKAGES = ("fastcore_ops", "benchmarks", "tools")
PYTHON_SCRIPTS = sorted(path.relative_to(REPORTS).as_posix() for path in REPORTS.rglob("*.py"))


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_names(source: str) -> list[str]:
    """Where ``source`` reaches a private name of the project (``_name``): a private module or name imported from
    fastcore_ops, benchmarks or tools, or an attribute ``_name`` of what it imported from them."""
    found, project_names = [], set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in PROJECT_PACKAGES:
                    project_names.add(alias.asname or alias.name.split(".")[0])
                    if any(map(_private, alias.name.split("."))):
                        found.append(f"line {node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module.split(".")[0] in PROJECT_PACKAGES:
            for alias in node.names:
                project_names.add(alias.asname or alias.name)
                if any(map(_private, [*node.module.split("."), alias.name])):
                    found.append(f"line {node.lineno}: from {node.module} import {alias.name}")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in project_names:
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return sorted(set(found), key=lambda where: int(where.split()[1].rstrip(":")))


@pytest.mark.parametrize("script", PYTHON_SCRIPTS)
def test_every_script_in_reports_imports_and_uses_only_public_names(script):
    """A refactor that renames a private name must not break a report's script silently: they use public ones."""
    assert private_names((REPORTS / script).read_text()) == [], (
        f"reports/{script} uses private names of the project: make what it needs public (and documented), or "
        "measure through a public function")
    assert callable(load(script).main)


def test_the_private_name_check_finds_each_way_in():
    source = """
import fastcore_ops.kernels.blurpool as blurpool
import fastcore_ops.training.trainer
from fastcore_ops.data.backends.workers import _jpeg_region
from fastcore_ops.data.backends.workers._jpeg_region import decode_region
from fastcore_ops.training.tradeoff.results import _record, read_results
from fastcore_ops import __version__
import os

blurpool._blurpool2d_eager = blurpool.blurpool2d_reference
fastcore_ops.training.trainer.Trainer._next_step = None
read_results._cache, os._exit, blurpool.__name__
"""
    assert private_names(source) == [
        "line 4: from fastcore_ops.data.backends.workers import _jpeg_region",
        "line 5: from fastcore_ops.data.backends.workers._jpeg_region import decode_region",
        "line 6: from fastcore_ops.training.tradeoff.results import _record", "line 10: blurpool._blurpool2d_eager",
        "line 11: fastcore_ops.training.trainer.Trainer._next_step", "line 12: read_results._cache"]


def test_every_script_in_reports_is_tested():
    """A script added to reports/ needs a test here."""
    source = Path(__file__).read_text()
    scripts = sorted(path.relative_to(REPORTS).as_posix() for path in REPORTS.rglob("*")
                     if path.suffix in (".py", ".sh"))
    assert [script for script in scripts if f'"{script}' not in source] == []


def test_worker_niceness_measure_sets_the_default_and_passes_the_rest_to_train(monkeypatch, capsys):
    from fastcore_ops.data.backends import pil as pil_backend

    monkeypatch.setattr(pil_backend, "CPU_WORKER_NICENESS", pil_backend.CPU_WORKER_NICENESS)  # restored after
    assert load("worker-niceness-20261127/measure.py").main(["5", "--recipe", "no_such_recipe", "--out", "x"]) == 2
    assert pil_backend.CPU_WORKER_NICENESS == 5
    assert "no_such_recipe" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [[], ["ten", "--recipe", "cifar_mild"], ["-3"], ["20"], ["²"]])
def test_worker_niceness_measure_refuses_a_niceness_that_is_not_0_to_19(argv, monkeypatch, capsys):
    from fastcore_ops.data.backends import pil as pil_backend

    monkeypatch.setattr(pil_backend, "CPU_WORKER_NICENESS", pil_backend.CPU_WORKER_NICENESS)
    default = pil_backend.CPU_WORKER_NICENESS
    assert load("worker-niceness-20261127/measure.py").main(argv) == 2
    assert pil_backend.CPU_WORKER_NICENESS == default
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: NICENESS must be an integer from 0 to 19")


def test_worker_niceness_measure_sh(tmp_path, ten_jpegs, children_compute):
    command = ["bash", str(REPORTS / "worker-niceness-20261127/measure.sh"), str(ten_jpegs), str(tmp_path / "runs"),
               "1", "--epochs", "1", "--set", "data.batch_size=10"]
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
    finished = subprocess.run(command, cwd=ROOT, env={**os.environ, "PATH": path}, capture_output=True, text=True,
                              timeout=HANG_GUARD_S)
    assert finished.returncode == 0, finished.stderr
    rows = list(csv.DictReader(finished.stdout.splitlines()))
    assert [row["niceness"] for row in rows] == ["0", "5", "10"]
    assert all(float(row["train_seconds"]) > 0 for row in rows)


def test_mild_methods_tta_cost(ten_jpegs, children_compute):
    """Run as its command line says, in a child computing as a user's does: in this process cifar_mild's BlurPool
    and loss run through Triton's interpreter, which took over a minute (their values are tested elsewhere)."""
    command = [sys.executable, str(REPORTS / "cifar-mild-methods-20261128/tta_cost.py"), str(ten_jpegs),
               "--rounds", "1", "--threads", "1", "--set", "data.batch_size=5", "--set", "data.num_workers=0"]
    finished = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert finished.returncode == 0, finished.stderr
    rows = list(csv.DictReader(finished.stdout.splitlines()))
    assert [row["evaluation"] for row in rows] == ["plain", "tta"]
    assert all(float(row["seconds"]) > 0 for row in rows)


def test_cost_model_step_times_collect_and_by_epoch(ten_jpegs, tmp_path, capsys):
    """A run with its steps' seconds kept, made a sweep, and set epoch by epoch beside made-up step costs."""
    from fastcore_ops.training.assemble import build_trainer
    from fastcore_ops.training.config import load_config, setup_hash
    from fastcore_ops.training.tradeoff.results import read_results
    from fastcore_ops.training.tradeoff.costs_file import write_costs
    from fastcore_ops.training.tradeoff.step_costs import KindCost, SetupCost, StepCosts
    from fastcore_ops.training.tradeoff.step_kinds import plan_run

    run = tmp_path / "run"
    assert load("cifar-cost-model-20261129/step_times.py").main(
        ["--recipe", "cifar_baseline", "--budget", "0.25", "--data", str(ten_jpegs), "--out", str(run),
         "--no-progress", "--eval-every", "0", "--device", "cpu", "--threads", "1", "--set", "data.batch_size=1",
         "--set", "data.num_workers=0"]) == 0
    steps = json.loads((run / "steps.json").read_text())
    assert [step for step, _ in steps] == list(range(len(steps))) and len(steps) > 5
    assert all(seconds > 0 for _, seconds in steps) and (run / "machine.txt").read_text().strip()

    collect = load("cifar-cost-model-20261129/collect.py")
    assert collect.main([str(tmp_path / "sweep"), str(run)]) == 0
    assert collect.main([str(tmp_path / "sweep"), str(run)]) == 2  # its folder exists now: nothing overwritten
    assert "exists" in capsys.readouterr().err
    [record] = read_results(tmp_path / "sweep")
    assert (record.recipe, record.budget, record.steps) == ("cifar_baseline", 0.25, len(steps))

    config = load_config(run / "config.json")
    trainer = build_trainer(config, data=ten_jpegs, out=None, device=torch.device("cpu"), subset=None,
                            progress=False, eval_every=0)
    setup = setup_hash(config)
    plan = plan_run(trainer, setup)
    trainer.train_loader.close()
    trainer.task.close()
    costs = StepCosts(machine="made up", threads=1, rounds=1, warmup=0, timed=1,
                      kinds={kind: KindCost(kind, 2.0, 1.0, 1) for kind in plan.steps},
                      setups={setup: SetupCost(setup, "cifar_baseline", "fp32", 0.0, 0.0, 0.0, decoding_workers=0)})
    write_costs(costs, tmp_path / "costs.json")
    by_epoch = load("cifar-cost-model-20261129/by_epoch.py")
    assert by_epoch.main([str(tmp_path / "costs.json"), str(tmp_path / "sweep"), "--data", str(ten_jpegs)]) == 0
    report = capsys.readouterr().out
    lines = report.splitlines()
    epoch_table = lines[lines.index("| epoch | measured (s) | modelled (s) | error |") + 2:]
    epochs = [line.split(" | ") for line in epoch_table[:epoch_table.index("")]]
    # 2 s a step while its images are decoded (the first epoch), 1 s once the in-process loader keeps them.
    per_epoch = [sum(step // plan.steps_per_epoch == epoch for step, _ in steps) for epoch in range(len(epochs))]
    assert [float(row[2]) for row in epochs] == [2 * per_epoch[0], *per_epoch[1:]]
    measured = sum(seconds for _, seconds in steps)  # each epoch's printed to 0.1 s
    assert sum(float(row[1]) for row in epochs) == pytest.approx(measured, abs=0.051 * len(epochs))
    assert f"modelled {len(steps) + per_epoch[0]:.1f} s" in report
    assert "| 32 px | 1.000 |" in report and "| 32 px | 0.000 |" in report  # the kind's rows, decoded and kept

    (tmp_path / "sweep" / "runs" / "cifar_baseline-x0.25-s0" / "steps.json").write_text("[[99999, 1.0]]")
    assert by_epoch.main([str(tmp_path / "costs.json"), str(tmp_path / "sweep"), "--data", str(ten_jpegs)]) == 2
    assert "steps.json: expected [[step, seconds], ...]" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["../../escaped", "a/b", ".."])
def test_cost_model_collect_refuses_a_run_whose_config_names_a_folder_outside_out(name, tmp_path, capsys):
    """A finished run whose config.json names itself ../../escaped was copied to OUT/runs/../../escaped-x1-s0."""
    from fastcore_ops.training.config import to_dict
    from fastcore_ops.training.recipes import get_recipe

    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({**to_dict(get_recipe("cifar_baseline")), "name": name}))
    (run / "summary.json").write_text(json.dumps({
        "metrics": {"top1": 0.5}, "metric": "top1", "higher_is_better": True, "metric_label": "top-1 (%)", "steps": 3,
        "train_seconds": 3.0, "first_epoch_seconds": 1.0, "samples_per_second": 10.0, "sample_unit": "images"}))
    for kept in ("run.json", "metrics.jsonl", "machine.txt", "steps.json"):
        (run / kept).write_text("{}\n")
    before = sorted(tmp_path.rglob("*"))
    assert load("cifar-cost-model-20261129/collect.py").main([str(tmp_path / "a" / "sweep"), str(run)]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"error: {run / 'config.json'}: name {name!r} ") and error.count("\n") == 1
    assert sorted(tmp_path.rglob("*")) == before  # nothing written, in OUT or beside it


def test_frontier_machine_time(tmp_path, capsys):
    """Finished runs' hours summed per folder; a failed run counts nothing."""
    from fastcore_ops.training.tradeoff.results import FailedRun, RunRecord, write_results

    write_results([RunRecord.made_up("a", seconds=3600), RunRecord.made_up("a", seed=1, seconds=1800),
                   FailedRun("m", "a", 2.0, 0, "failed", "exit code 1")], tmp_path / "one")
    write_results([RunRecord.made_up("b", seconds=5400)], tmp_path / "two")
    machine_time = load("cifar-frontier-20261129/machine_time.py")
    assert machine_time.main([str(tmp_path / "one"), str(tmp_path / "two")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2] == f"| `{tmp_path / 'one'}` | 2 | 1.50 |" and lines[3] == f"| `{tmp_path / 'two'}` | 1 | 1.50 |"
    assert lines[4] == "| **all** | **3** | **3.0** (1.5 machine-hours, two lanes at a time) |"

    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "results.json").write_text("{not json")
    for argv in ([str(tmp_path / "one"), str(tmp_path / "missing")], [str(tmp_path / "bad")], []):
        assert machine_time.main(argv) == 2
        out, err = capsys.readouterr()
        assert out == "" and len(err.splitlines()) == 1 and err.startswith("error: ")


def test_cifar_record_frontier(tmp_path, capsys):
    """Per recipe and budget the runs' mean time and top-1 (with TTA only where every run has it), airbench94's
    mean last, and the figure; an unreadable input is one error line and nothing written."""
    from fastcore_ops.training.tradeoff.results import RunRecord, write_results

    write_results([RunRecord.made_up("base", 1.0, 3, quality=0.85, seconds=500.0),
                   RunRecord.made_up("base", 1.0, 4, quality=0.86, seconds=520.0),
                   RunRecord.made_up("rec", 0.5, 3, quality=0.88, seconds=400.0, metrics={"top1_tta": 0.89}),
                   RunRecord.made_up("rec", 1.0, 3, quality=0.90, seconds=800.0, metrics={"top1_tta": 0.91})],
                  tmp_path / "cost")
    peers = tmp_path / "peers.json"
    peers.write_text(json.dumps({"runs": [
        {"trainer": "airbench", "train_seconds": 900.0, "top1": 0.896, "top1_tta": 0.905},
        {"trainer": "airbench", "train_seconds": 1000.0, "top1": 0.898, "top1_tta": 0.907},
        {"trainer": "ours", "train_seconds": 950.0, "top1": 0.9, "top1_tta": 0.91}]}))
    frontier = load("cifar-record-frontier-20261204/frontier.py")
    assert frontier.main([str(tmp_path / "cost"), str(peers), "--out", str(tmp_path)]) == 0
    rows = (tmp_path / "frontier.md").read_text().splitlines()
    assert rows[0].startswith("Our runs priced on m;")
    assert rows[4:] == ["| base | x1 | 2 | 510.0 | 85.50 |  |", "| rec | x0.5 | 1 | 400.0 | 88.00 | 89.00 |",
                        "| rec | x1 | 1 | 800.0 | 90.00 | 91.00 |",
                        "| airbench94 (measured) | x1 | 2 | 950.0 | 89.70 | 90.60 |"]
    assert (tmp_path / "frontier.png").stat().st_size > 0

    (tmp_path / "bad.json").write_text(json.dumps({"runs": [{"trainer": "ours"}]}))
    for argv in ([str(tmp_path / "cost"), str(tmp_path / "bad.json"), "--out", str(tmp_path / "new")],
                 [str(tmp_path / "missing"), str(peers), "--out", str(tmp_path / "new")],
                 [str(tmp_path / "cost"), str(peers), "--out", str(tmp_path / "new")]):
        assert frontier.main(argv) == 2
        out, err = capsys.readouterr()
        assert out == "" and len(err.splitlines()) == 1 and err.startswith("error: ")
    assert not (tmp_path / "new").exists()


def test_cifar_record_accuracy_evaluate_tta(ten_jpegs, tmp_path):
    from fastcore_ops.training import fit

    run = tmp_path / "run"
    fit("cifar_record", data=ten_jpegs, out=run, progress=False, eval_every=0, overrides={
        "data.batch_size": 4, "data.num_workers": 0, "precision": "fp32", "methods.patch_whitening.images": 8,
        "schedule.scale_schedule_ratio": 2 / 9.9})
    judged = load("cifar-record-accuracy-20261202/evaluate_tta.py").main(run, ten_jpegs)
    assert judged["airbench94"] == judged["final_in_checkpoint"]  # the TTA the run itself was judged with
    assert judged["flips_probabilities"]["top1"] == judged["final_in_checkpoint"]["top1"]
    assert set(judged["flips_probabilities"]) == {"top1", "eval_loss", "top1_tta"}


def test_read_ahead_cold_start(ten_jpegs, tmp_path, monkeypatch, capsys, children_compute):
    """Two pairs of one-epoch runs from the same checkout, alternating, the page cache emptied before each."""
    cold_start = load("read-ahead-20261203/cold_start.py")
    emptied = []
    monkeypatch.setattr(cold_start, "empty_page_cache", lambda: emptied.append(1))  # as root only
    argv = [str(ROOT), str(ROOT), str(tmp_path / "out"), "--data", str(ten_jpegs), "--threads", "1",
            "--set", "data.batch_size=5"]
    assert cold_start.main(argv) == 0
    runs = json.loads((tmp_path / "out" / "cold_start.json").read_text())
    assert [(run["pair"], run["checkout"]) for run in runs] == [(0, "before"), (0, "after"), (1, "after"),
                                                                 (1, "before")]
    assert len(emptied) == 4 and all(run["train_seconds"] > 0 and "data" in run["phase_seconds"] for run in runs)
    assert len(capsys.readouterr().out.splitlines()) == 4

    for bad in ([str(tmp_path), str(ROOT), str(tmp_path / "new")], [str(ROOT), str(ROOT), str(tmp_path / "out")],
                [str(ROOT), str(ROOT), str(tmp_path / "new"), "--pairs", "0"], [str(ROOT)]):
        assert cold_start.main(bad) == 2
        out, err = capsys.readouterr()
        assert out == "" and len(err.splitlines()) == 1 and err.startswith("error: ")
    assert not (tmp_path / "new").exists() and len(emptied) == 4


def test_torchrun_exit_abort_counts_a_pair_of_two_process_runs(tmp_path):
    # Both sides from this checkout: each run trains (its summary is written) and is counted 0 or 1.
    finished = subprocess.run(["bash", str(REPORTS / "torchrun-exit-abort-20261205/count_aborts.sh"), "1", str(ROOT)],
                              cwd=ROOT, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert re.fullmatch(r"pair 1: runs that aborted at exit: before [01], now [01]\n", finished.stdout), finished.stdout
