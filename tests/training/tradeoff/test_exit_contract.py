"""One exit contract for ``python -m fastcore_ops.training.tradeoff`` and ``python -m fastcore_ops.training.ablate``: bad input is exit 2
with exactly one ``error:`` line on stderr and no traceback, and --out is left exactly as it was; a folder of
someone else's files is never written into, and inside a folder the tool owns only its own files go."""

import json

import pytest

from fastcore_ops.owned_folder import claim_folder
from fastcore_ops.training.ablate import cli as ablate
from fastcore_ops.training.tradeoff import cli as tradeoff
from fastcore_ops.training.tradeoff.results import write_results
from tests.training.tradeoff import fakes

TOOLS = {"tradeoff": tradeoff.main, "ablate": ablate.main}
SWEEP_ARGS = {"tradeoff": ["--recipes", "cifar_baseline,cifar_mild", "--budgets", "1"],
              "ablate": ["--recipe", "cifar_baseline", "--methods", "cutout", "--budgets", "1", "--seeds", "1",
                         "--first-seed", "0"]}


def _stranger(out):
    out.mkdir()
    (out / "thesis.tex").write_text("months of work")


def _owned_by(tool):
    def prepare(out):
        claim_folder(out, tool)
    return prepare


def _a_file(out):
    out.write_text("not a folder")


def _finished_elsewise(out):
    """An owned folder with a finished run that another configuration trained (batch 64, not the recipe's)."""
    claim_folder(out, "tradeoff")
    folder = out / "runs" / "cifar_baseline-x1-s0"
    folder.mkdir(parents=True)
    command = ["--recipe", "cifar_baseline", "--budget", "1.0", "--seed", "0", "--out", str(folder),
               "--set", "data.batch_size=64"]
    fakes.write_run(command)


def _merge_input(tmp_path, text):
    folder = tmp_path / "merged-from"
    folder.mkdir()
    (folder / "results.json").write_text(text)
    return folder


def _good_merge_input(tmp_path):
    write_results(fakes.SWEEP, tmp_path / "merged-from")
    return tmp_path / "merged-from"


# (tool, arguments after the tool's --out and --data, how --out is found, what the error line says)
REFUSALS = [
    ("tradeoff", ["--recipes", "cifar_spicy", "--budgets", "1"], None, "--recipes cifar_spicy: no such recipe"),
    ("tradeoff", ["--recipes", "cifar_mild", "--budgets", "1,nan"], None, "'nan' is not a budget"),
    ("tradeoff", ["--recipes", "cifar_mild", "--budgets", "1", "--seeds", "0"], None,
     "argument --seeds: must be a whole number >= 1"),
    ("tradeoff", ["--recipes", "cifar_mild", "--budgets", "1", "--seeds", "two"], None, "argument --seeds: must be a whole number >= 1, got 'two'"),
    ("tradeoff", ["--recipes", "cifar_mild", "--budgets", "1", "--bogus"], None, "unrecognized arguments: --bogus"),
    ("tradeoff", ["--recipes", "cifar_mild", "--budgets", "1", "--set", "optimizer.beta=1"], None,
     "unknown field 'beta'"),
    ("tradeoff", ["--recipes", "cifar_mild", "--budgets", "1", "--times", "costs.json"], None,
     "--times goes with --cost"),
    ("tradeoff", ["--cost", "sweep", "--recipes", "cifar_mild"], None, "--cost prices existing runs; it takes no --recipes"),
    ("tradeoff", SWEEP_ARGS["tradeoff"], _stranger, "did not write (it has no .fastcore_ops-tradeoff)"),
    ("tradeoff", SWEEP_ARGS["tradeoff"], _owned_by("ablate"), "did not write (it has no .fastcore_ops-tradeoff)"),
    ("tradeoff", SWEEP_ARGS["tradeoff"], _a_file, "is a file, not a folder"),
    ("tradeoff", SWEEP_ARGS["tradeoff"], _finished_elsewise, "holds a finished run with another configuration"),
    ("ablate", ["--recipe", "cifar_spicy"], None, "--recipe cifar_spicy: no such recipe"),
    ("ablate", ["--recipe", "cifar_baseline", "--methods", "cutout,spicy"], None, "--methods spicy: no such method"),
    ("ablate", ["--recipe", "cifar_baseline", "--seeds", "0"], None, "argument --seeds: must be a whole number >= 1"),
    ("ablate", ["--recipe", "cifar_baseline", "--subset", "0"], None, "argument --subset: must be a whole number >= 1"),
    ("ablate", ["--recipe", "cifar_baseline", "--set", "seed=3"], None, "use --seeds and --budgets instead"),
    ("ablate", ["--recipe", "cifar_baseline", "--budgets", "0"], None, "'0' is not a budget"),
    ("ablate", ["--recipe", "cifar_baseline", "--seeds", "two"], None, "argument --seeds: must be a whole number >= 1, got 'two'"),
    ("ablate", ["--recipe", "gpt_baseline", "--methods", "cutout"], None, "--methods: cutout applies to task "),
    ("ablate", SWEEP_ARGS["ablate"], _stranger, "did not write (it has no .fastcore_ops-ablate)"),
    ("ablate", SWEEP_ARGS["ablate"], _owned_by("tradeoff"), "did not write (it has no .fastcore_ops-ablate)"),
    ("ablate", SWEEP_ARGS["ablate"], _a_file, "is a file, not a folder"),
]


def _refused(main, args, out, capsys):
    """Run the command, which must refuse: exit 2, one error line, no traceback, --out as it was; the line."""
    before = fakes.snapshot(out) if out.is_dir() else (out.exists() and out.read_bytes())
    assert main(args) == 2
    captured = capsys.readouterr()
    line, = captured.err.splitlines()
    assert line.startswith("error: ") and "Traceback" not in captured.err
    assert (fakes.snapshot(out) if out.is_dir() else (out.exists() and out.read_bytes())) == before
    return line


@pytest.mark.parametrize("tool, args, out_state, message", REFUSALS,
                         ids=[f"{tool}-{message[:30]}" for tool, _, _, message in REFUSALS])
def test_bad_input_is_one_error_line_exit_2_and_leaves_out_as_it_was(tool, args, out_state, message, data, tmp_path,
                                                                      capsys):
    out = tmp_path / "out"
    if out_state is not None:
        out_state(out)
    line = _refused(TOOLS[tool], [*args, "--data", str(data), "--out", str(out)], out, capsys)
    assert message in line


def test_a_missing_data_folder_and_missing_data_are_refused_alike(tmp_path, capsys):
    out = tmp_path / "out"
    for main, args in ((tradeoff.main, SWEEP_ARGS["tradeoff"]), (ablate.main, SWEEP_ARGS["ablate"])):
        assert "no such folder" in _refused(main, [*args, "--data", str(tmp_path / "nowhere"), "--out", str(out)],
                                            out, capsys)
        assert "--data is required" in _refused(main, [*args, "--out", str(out)], out, capsys)
        assert "required: --out" in _refused(main, args, out, capsys)


@pytest.mark.parametrize("prepare, message", [
    (lambda tmp_path: tmp_path / "nowhere", "no results.json"),
    (lambda tmp_path: _merge_input(tmp_path, "{not json"), "results.json is not a list of run records"),
    (lambda tmp_path: _merge_input(tmp_path, '{"runs": []}'), "it holds a JSON dict"),
    (lambda tmp_path: _merge_input(tmp_path, json.dumps([{"machine": "m", "recipe": "r", "budget": "big",
                                                           "seed": 0, "status": "failed", "reason": ""}])),
     "budget must be a number > 0, got str 'big'"),
    (lambda tmp_path: _merge_input(tmp_path, json.dumps([{"machine": "m", "recipe": "r", "budget": 1, "seed": 0,
                                                           "status": "lost", "reason": ""}])),
     "status must be one of 'diverged', 'failed', got 'lost'"),
], ids=["not-a-sweep-output", "not-json", "not-a-list", "a-word-for-a-budget", "unknown-status"])
def test_a_merge_of_bad_results_is_refused_naming_the_file(prepare, message, tmp_path, capsys):
    source, out = prepare(tmp_path), tmp_path / "out"
    line = _refused(tradeoff.main, ["--merge", str(source), "--out", str(out)], out, capsys)
    assert message in line and str(source) in line


def test_a_merge_into_a_folder_of_someone_else_s_files_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    _stranger(out)
    line = _refused(tradeoff.main, ["--merge", str(_good_merge_input(tmp_path)), "--out", str(out)], out, capsys)
    assert "holds files that python -m fastcore_ops.training.tradeoff did not write" in line
    assert tradeoff.main(["--merge", str(tmp_path / "merged-from"), "--out", str(tmp_path / "new")]) == 0
    assert tradeoff.main(["--merge", str(tmp_path / "merged-from"), "--out", str(tmp_path / "new")]) == 0  # its own


@pytest.mark.parametrize("tool", TOOLS)
def test_a_stranger_s_files_inside_a_folder_the_tool_owns_are_never_deleted(tool, data, tmp_path, monkeypatch, capsys):
    fakes.install(monkeypatch)
    out = tmp_path / "out"
    claim_folder(out, tool)
    run = out / "runs" / "cifar_baseline-x1-s0"
    run.mkdir(parents=True)
    strangers = (out / "notes.txt", run / "notes.txt", out / "runs" / "notes.txt")
    for path in strangers:
        path.write_text("mine")
    (run / "metrics.jsonl").write_text("left by a run killed before its first checkpoint")
    assert TOOLS[tool]([*SWEEP_ARGS[tool], "--data", str(data), "--out", str(out), "--no-progress"]) == 0
    assert all(path.read_text() == "mine" for path in strangers)
    assert not (run / "metrics.jsonl").exists() and (out / "report.html").is_file()
    capsys.readouterr()
