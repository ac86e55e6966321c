"""The ALiBi extrapolation experiment on the trainer: its configurations, rows, and a tiny end-to-end run.

The end-to-end runs use the ALiBi kernel's PyTorch reference (this is about the experiment,
not the kernel, which tests/kernels covers) and a tiny model and corpus.
"""

import csv
import json
import math

import pytest
import torch

from fastcore_ops.kernels import backend
from fastcore_ops.training.alibi_experiment import evaluation_rows, run_experiment, train_config
from fastcore_ops.training.alibi_extrapolation import main
from fastcore_ops.training.extrapolation_config import CANNOT_RUN, RESULT_FILES, ExtrapolationConfig
from fastcore_ops.training.assemble import build_trainer
from fastcore_ops.training.tasks.language import prepare_text_data


@pytest.fixture
def reference_kernels(monkeypatch):
    monkeypatch.setattr(backend, "INTERPRETING", False)


def tiny_config(**overrides) -> ExtrapolationConfig:
    settings = dict(train_length=16, steps=3, batch_size=4, n_layer=1, n_head=2, n_embd=32) | overrides
    return ExtrapolationConfig(**settings)


def test_both_models_share_every_setting_but_the_alibi_surgery():
    learned, alibi = (train_config(tiny_config(), kind, steps_per_epoch=30) for kind in ("learned", "alibi"))
    assert learned.methods.alibi is None and alibi.methods.alibi.max_sequence_length == 8192
    assert learned.schedule.epochs == pytest.approx(3 / 30)  # exactly ``steps`` steps
    assert (learned.text.eval_length_multiples, alibi.text.eval_length_multiples) == ((1,), (1, 2, 4, 8))
    assert (learned.optimizer, learned.data, learned.text.sequence_length, learned.seed) == (
        alibi.optimizer, alibi.data, alibi.text.sequence_length, alibi.seed)
    with pytest.raises(ValueError, match="kind must be one of"):
        train_config(tiny_config(), "rope", steps_per_epoch=30)


def test_alibi_model_is_the_learned_model_operated_on(tiny_text, tmp_path, reference_kernels):
    config = tiny_config()
    data = prepare_text_data(train_config(config, "learned", 1), tiny_text, progress=False)
    learned, alibi = (build_trainer(train_config(config, kind, 30), data=data, out=None, device=torch.device("cpu"),
                                    progress=False).model for kind in ("learned", "alibi"))
    assert alibi.wpe is None and alibi.config.position == "alibi" and learned.config.position == "learned"
    learned_state = {k: v for k, v in learned.state_dict().items() if not k.startswith("wpe.")}
    assert learned_state.keys() == alibi.state_dict().keys()
    assert all(v.equal(alibi.state_dict()[k]) for k, v in learned_state.items())


def test_rows_mark_the_lengths_a_model_did_not_run():
    rows = evaluation_rows("alibi", {"eval_loss": 1.0, "bits_per_byte": 1.44, "eval_loss@2L": 1.1,
                                     "bits_per_byte@2L": 1.59}, tiny_config(length_multiples=(1, 2, 4)))
    assert [(r["length"], r["status"], r["loss"]) for r in rows] == [(16, "ok", 1.0), (32, "ok", 1.1),
                                                                      (64, CANNOT_RUN, None)]


@pytest.mark.parametrize("argv,message", [
    (["--steps", "0"], "steps must be an int >= 1, got 0"),
    (["--train-length", "1"], "train_length must be an int >= 2, got 1"),
    (["--n-embd", "30", "--n-head", "4"], "n_embd must be divisible by n_head"),
    (["--device", "tpu"], "argument --device: 'tpu' is not a device name; use cpu, cuda or cuda:N"),
    (["--steps", "two"], "argument --steps: invalid int value: 'two'"),
    (["--out", "{stranger}"], "holds files that python -m fastcore_ops.training.alibi_extrapolation did not write"),
])
def test_bad_options_stop_with_a_clear_message(argv, message, tmp_path, capsys):
    stranger = tmp_path / "stranger"
    stranger.mkdir()
    (stranger / "results.csv").write_text("mine")
    out = [] if "--out" in argv else ["--out", str(tmp_path / "out")]  # --out is required
    assert main([argument.format(stranger=stranger) for argument in argv] + [*out, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err
    assert [path.name for path in stranger.iterdir()] == ["results.csv"]


def test_a_tiny_run_learns_and_only_alibi_runs_beyond_the_training_length_at_the_loss_it_had_there(
        tmp_path, tiny_text, reference_kernels):
    out = tmp_path / "out"
    # 40 steps take the loss from about 5.3 nats (uniform: log 256 = 5.55) to about 4.05 at L = 16.
    results = run_experiment(tiny_config(steps=40), out, data=tiny_text, progress=False)

    assert all((out / name).is_file() and (out / name).stat().st_size > 0 for name in RESULT_FILES)
    assert json.loads((out / "results.json").read_text())["rows"] == results["rows"]
    rows = {(row["model"], int(row["length"])): row for row in csv.DictReader(open(out / "results.csv"))}
    assert set(rows) == {(model, length) for model in ("learned", "alibi") for length in (16, 32, 64, 128)}
    assert rows[("learned", 16)]["status"] == "ok"
    for length in (32, 64, 128):
        assert rows[("learned", length)]["status"] == CANNOT_RUN and rows[("learned", length)]["loss"] == ""
    trained = float(rows[("alibi", 16)]["loss"])
    assert trained < math.log(256) - 1.0  # it learned: an untrained model sits near log 256
    assert abs(float(rows[("learned", 16)]["loss"]) - trained) < 0.2  # as well as learned positions at L
    for length in (32, 64, 128):  # and ALiBi holds that loss at 2L, 4L and 8L
        alibi = rows[("alibi", length)]
        assert alibi["status"] == "ok" and abs(float(alibi["loss"]) - trained) < 0.1
    assert results["models"]["alibi"]["parameters"] == results["models"]["learned"]["parameters"] - 16 * 32
    assert results["models"]["alibi"]["steps"] == results["models"]["learned"]["steps"] == 40


def test_command_line_prints_the_table(tmp_path, tiny_text, reference_kernels, capsys):
    main(["--train-length", "16", "--steps", "2", "--batch-size", "4", "--n-layer", "1", "--n-head", "2",
          "--n-embd", "32", "--data", str(tiny_text), "--out", str(tmp_path / "cli"), "--no-progress"])
    printed = capsys.readouterr().out
    assert "18 training files" in printed and "2 validation files" in printed
    table = [line.split() for line in printed.splitlines() if line.startswith(("learned ", "alibi "))]
    assert [(row[0], row[1]) for row in table] == [(m, str(n)) for m in ("learned", "alibi") for n in (16, 32, 64, 128)]
    assert sum(" ".join(row).endswith(CANNOT_RUN) for row in table) == 3
    assert (tmp_path / "cli" / "extrapolation.png").is_file()
