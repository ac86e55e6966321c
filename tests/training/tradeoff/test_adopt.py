"""--adopt: finished runs of python -m fastcore_ops.training.train into a tradeoff folder that --merge and --cost read."""

import json
from pathlib import Path

import pytest

from fastcore_ops.training.tradeoff.cli import main
from fastcore_ops.training.tradeoff.results import read_results
from fastcore_ops.training.tradeoff.trained_config import record_config

from tests.training.tradeoff import fakes


def _trained(folder: Path, recipe: str, budget: float, seed: int) -> Path:
    """What ``python -m fastcore_ops.training.train`` leaves in ``folder``, a checkpoint included."""
    folder.mkdir(parents=True)
    fakes.write_run(["--recipe", recipe, "--budget", str(budget), "--seed", str(seed), "--out", str(folder)])
    summary = json.loads((folder / "summary.json").read_text())
    (folder / "summary.json").write_text(json.dumps({**summary, "steps": 5000}))  # an epoch's steps at least
    (folder / "checkpoint.pt").write_bytes(b"weights")
    return folder


def test_runs_are_named_by_their_configs_and_read_back_by_merge_and_the_cost_pass(tmp_path, capsys):
    runs = [_trained(tmp_path / "baseline-seed-3", "cifar_baseline", 1.0, 3),
            _trained(tmp_path / "mild-seed-3", "cifar_mild", 0.5, 3)]
    (runs[1] / "machine.txt").write_text("vm/AMD EPYC\n")
    out = tmp_path / "adopted"
    assert main(["--adopt", *map(str, runs), "--out", str(out)]) == 0
    assert "2 runs adopted" in capsys.readouterr().out
    assert sorted(path.name for path in (out / "runs").iterdir()) == ["cifar_baseline-x1-s3", "cifar_mild-x0.5-s3"]
    # The run's configuration, summary and machine label; not its checkpoint.
    assert sorted(path.name for path in (out / "runs" / "cifar_mild-x0.5-s3").iterdir()) == [
        "config.json", "machine.txt", "summary.json"]
    records = read_results(out)
    assert [(r.recipe, r.budget, r.seed, r.machine) for r in records] == [
        ("cifar_baseline", 1.0, 3, "unknown/unknown"), ("cifar_mild", 0.5, 3, "vm/AMD EPYC")]
    assert (out / "report.html").exists() and (out / "speedups.md").exists()
    # The cost pass finds each run's configuration in the folder (it hashes to what the run recorded).
    assert [record_config(record, [out]).name for record in records] == ["cifar_baseline", "cifar_mild"]


@pytest.mark.parametrize("problem, message", [
    ("unfinished", "no summary.json; the run has not finished"),
    ("no-config", "cannot read the configuration"),
    ("twice", "more than one run is cifar_mild-x1-s3"),
    ("out-has-runs", "already holds runs; adopt into a new folder"),
])
def test_a_run_it_cannot_adopt_is_one_error_line_and_nothing_written(tmp_path, capsys, problem, message):
    run = _trained(tmp_path / "run", "cifar_mild", 1.0, 3)
    runs = [run]
    out = tmp_path / "adopted"
    if problem == "unfinished":
        (run / "summary.json").unlink()
    elif problem == "no-config":
        (run / "config.json").unlink()
    elif problem == "twice":
        runs.append(_trained(tmp_path / "again", "cifar_mild", 1.0, 3))
    else:
        (out / "runs").mkdir(parents=True)
    before = sorted(path.relative_to(tmp_path) for path in tmp_path.rglob("*"))
    assert main(["--adopt", *map(str, runs), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err
    assert sorted(path.relative_to(tmp_path) for path in tmp_path.rglob("*")) == before


def test_adopt_is_a_mode_of_its_own(tmp_path, capsys):
    run = _trained(tmp_path / "run", "cifar_mild", 1.0, 3)
    for extra, message in ((["--merge", str(tmp_path)], "--merge and --adopt are two modes"),
                           (["--recipes", "cifar_mild"], "--adopt reports on finished runs; it takes no --recipes")):
        assert main(["--adopt", str(run), *extra, "--out", str(tmp_path / "out")]) == 2
        assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
