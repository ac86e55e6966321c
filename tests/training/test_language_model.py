"""Language models on the one trainer: ``python -m fastcore_ops.training.train`` end to end, resume, models, and bad input.

The runs use a 1-layer GPT at length 16 on 18 small real source files (``tiny_text``); ALiBi runs
its PyTorch reference, not Triton's interpreter (tests/kernels covers the kernel).
"""

import json
import math
import os
import re
import shutil
import signal

import numpy as np
import pytest
import torch

from fastcore_ops.kernels import backend
from fastcore_ops.training.assemble import build_trainer
from fastcore_ops.training.config import override
from fastcore_ops.training.methods import Method
from fastcore_ops.training.methods.registry import plan_methods
from fastcore_ops.training.recipes import get_recipe
from fastcore_ops.training.tasks.language import (build_language_modeling, keep_run_tokenizer, prepare_text_data,
                                                   tokens_record)
from fastcore_ops.training.text.tokens import load_prepared
from fastcore_ops.training.train import main
from tests.training.test_train import (HELD, _assert_same_run, _finish, _run, _summary,
                                      _wait_for_mid_epoch_checkpoint)

TINY = ["--set", "model.options={'n_layer': 1, 'n_head': 2, 'n_embd': 32}", "--set", "text.sequence_length=16",
        "--set", "text.eval_batch_tokens=256", "--set", "data.batch_size=8", "--set", "schedule.warmup_epochs=0.01",
        "--no-progress"]
EVERY = 3
# 396 steps an epoch (3,175 windows of 17 bytes in 54,000, batches of 8): 79 steps, a checkpoint every 3.
RESUMABLE = ["--recipe", "gpt_alibi", *TINY, "--epochs", "0.2", "--checkpoint-every", str(EVERY)]


@pytest.fixture
def reference_kernels(monkeypatch):
    monkeypatch.setattr(backend, "INTERPRETING", False)


def _tiny_config(recipe: str, *assignments: str):
    pairs = [value for flag, value in zip(TINY[:-1:2], TINY[1::2]) if flag == "--set"]
    return override(get_recipe(recipe), [*pairs, *assignments])


@pytest.fixture(scope="module")
def alibi_reference(tiny_text, tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "gpt_alibi"
    code, stdout, stderr = _finish(_run(*RESUMABLE, "--data", str(tiny_text), "--out", str(out)))
    assert code == 0, stderr
    return out, stdout


def test_a_language_model_learns_and_reports_loss_at_each_length(alibi_reference):
    out, stdout = alibi_reference
    summary = _summary(out)
    assert (summary["metric"], summary["higher_is_better"], summary["sample_unit"]) == ("eval_loss", False, "tokens")
    metrics = summary["metrics"]
    assert set(metrics) == {f"{name}{suffix}" for name in ("eval_loss", "bits_per_byte", "perplexity")
                            for suffix in ("", "@2L", "@4L")}
    assert metrics["eval_loss"] < math.log(256) - 1, "79 steps on Python source beat the uniform 5.55 nats clearly"
    # Bytes are the tokens: bits per byte is the loss in bits, perplexity its exponential.
    assert metrics["bits_per_byte"] == pytest.approx(metrics["eval_loss"] / math.log(2))
    assert metrics["perplexity"] == pytest.approx(math.exp(metrics["eval_loss"]))
    assert summary["steps"] == round(0.2 * 396)
    assert "validation loss (nats/token)" in stdout and "tokens/s" in stdout
    assert json.loads((out / "tokens.json").read_text())["tokenizer"] == "bytes"


def test_a_language_model_stopped_mid_epoch_resumes_bit_identical(alibi_reference, tiny_text, tmp_path):
    """Sequence-length warmup, ALiBi, AdamW, clipping and the token windows' order all resume exactly."""
    out = tmp_path / "terminated"
    process = _run(*RESUMABLE, *HELD, "--data", str(tiny_text), "--out", str(out))
    _wait_for_mid_epoch_checkpoint(out, process)
    process.send_signal(signal.SIGTERM)
    code, _, stderr = _finish(process)
    assert code == 128 + signal.SIGTERM and "--resume" in stderr
    code, _, stderr = _finish(_run("--resume", "--no-progress", "--data", str(tiny_text), "--out", str(out)))
    assert code == 0, stderr
    _assert_same_run(out, alibi_reference[0])


def test_sequence_length_warmup_keeps_the_tokens_of_every_step(tiny_text, reference_kernels):
    config = _tiny_config("gpt_alibi", "schedule.epochs=0.05")
    data = prepare_text_data(config, tiny_text, progress=False)
    trainer = build_trainer(config, data=data, out=None, device=torch.device("cpu"), progress=False, eval_every=0)
    shapes = []

    class WatchShapes(Method):
        def on_before_loss(self, state):
            shapes.append(tuple(state.inputs.shape))

    trainer.methods.append(WatchShapes())
    result = trainer.fit()
    assert shapes[0] == (16, 8) and shapes[-1] == (8, 16), "from 8-token rows to the full length"
    assert all(rows * length == 8 * 16 for rows, length in shapes)
    assert result.samples_per_second > 0 and result.steps == len(shapes)


def test_gpt2_from_transformers_trains_with_the_alibi_surgery(tiny_text, reference_kernels):
    config = _tiny_config("gpt_alibi", "model.name=hf_gpt2", "schedule.epochs=0.02",
                          "model.options={'n_layer': 1, 'n_head': 2, 'n_embd': 32}")
    data = prepare_text_data(config, tiny_text, progress=False)
    trainer = build_trainer(config, data=data, out=None, device=torch.device("cpu"), progress=False, eval_every=0)
    assert type(trainer.model).__name__ == "GPT2LMHeadModel"
    metrics = trainer.fit().metrics
    assert math.isfinite(metrics["eval_loss@4L"]) and metrics["eval_loss"] < math.log(256)


def test_a_bpe_tokenizer_trains_and_is_kept_with_the_run(tiny_text, tmp_path, reference_kernels):
    out = tmp_path / "bpe"
    assert main(["--recipe", "gpt_baseline", *TINY, "--set", "text.tokenizer=bpe", "--set", "text.vocab_size=320",
                 "--epochs", "0.02", "--data", str(tiny_text), "--out", str(out)]) == 0
    metrics = _summary(out)["metrics"]
    # A BPE token stands for more than one byte: fewer bits per byte than bits per token.
    assert metrics["bits_per_byte"] < metrics["eval_loss"] / math.log(2)
    assert (out / "tokenizer.json").is_file() and json.loads((out / "tokens.json").read_text())["vocab_size"] <= 320


def test_a_resumed_run_refuses_tokens_of_another_tokenizer(tiny_text, micro_text, tmp_path):
    config = _tiny_config("gpt_baseline", "text.tokenizer=bpe", "text.vocab_size=300")
    first, second = (prepare_text_data(config, text, progress=False) for text in (tiny_text, micro_text))
    first_record, second_record = (tokens_record(load_prepared(folder).meta) for folder in (first, second))
    keep_run_tokenizer(tmp_path, first, first_record, resume=False)
    keep_run_tokenizer(tmp_path, first, first_record, resume=True)  # the same tokens: fine
    with pytest.raises(ValueError, match="trained with bpe tokens .* resume with the same --data"):
        keep_run_tokenizer(tmp_path, second, second_record, resume=True)


def test_learned_positions_are_not_evaluated_beyond_their_table(tiny_text):
    config = _tiny_config("gpt_baseline", "text.eval_length_multiples=(1, 2)")
    data = prepare_text_data(config, tiny_text, progress=False)
    with pytest.warns(UserWarning, match=r"ask for \[32\] tokens, more than the model's learned positions cover "
                                         r"\(16\).*alibi surgery"):
        _, _, task = build_language_modeling(config, plan_methods(config), data=data, device=torch.device("cpu"))
    assert list(task.eval_loaders) == [1]


def _texts(root, *sizes):
    """Files f0.txt, f1.txt, ... of ``sizes`` bytes of Python-like text: with 10 of them, the last is validation."""
    for index, size in enumerate(sizes):
        (root / f"f{index}.txt").write_bytes((b"x = [value + 1 for value in range(10)]\n" * (size // 40 + 1))[:size])


@pytest.mark.parametrize("sizes, args, message", [
    ((), [], "no text files"),
    ((6,) * 10, [], "train.bin holds 54 tokens, too few for one batch"),
    ((300,) * 9 + (1,), [], "the validation files of"),
    ((300,) * 9 + (16,), [], "validation.bin holds 16 tokens, too few to evaluate one window of the longest length "
                             "asked (1L = 16 tokens"),
    ((300,) * 9 + (60,), ["--recipe", "gpt_alibi"], "validation.bin holds 60 tokens, too few to evaluate one window of "
                                                    "the longest length asked (4L = 64 tokens"),
    ((300,) * 10, ["--set", "text.eval_length_multiples=(2,)"], "text.eval_length_multiples=(2,) leaves out 1"),
    ((300,) * 10, ["--set", "text.eval_length_multiples=(2, 4)", "--set", "model.name=hf_gpt2"],
     "add it: text.eval_length_multiples=(1, 2, 4)"),
    ((), ["--subset", "5"], "--subset (samples per class) does not apply to task 'language_model'"),
], ids=["empty-folder", "shorter-than-a-batch", "validation-of-one-byte", "validation-shorter-than-a-window",
        "validation-shorter-than-4L", "evaluation-lengths-without-L", "evaluation-lengths-without-L-gpt2", "subset"])
def test_text_that_cannot_train_is_refused_before_anything_is_written(sizes, args, message, tmp_path, capsys):
    root = tmp_path / "text"
    root.mkdir()
    _texts(root, *sizes)
    assert main(["--recipe", "gpt_baseline", *TINY, *args, "--data", str(root), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()


def test_a_broken_token_cache_or_damaged_tokens_are_refused_before_anything_is_written(tiny_text, tmp_path,
                                                                                       monkeypatch, capsys):
    run = ["--recipe", "gpt_baseline", *TINY, "--out", str(tmp_path / "run")]
    (tmp_path / "cache").write_text("mine")
    with monkeypatch.context() as patch:
        patch.setenv("FASTCORE_OPS_CACHE", str(tmp_path / "cache"))
        assert main([*run, "--data", str(tiny_text)]) == 2
    assert re.match(r"error: FASTCORE_OPS_CACHE=.*cache cannot hold the token cache .*; point FASTCORE_OPS_CACHE at "
                    r"a folder you can write to", capsys.readouterr().err)
    tokens = prepare_text_data(_tiny_config("gpt_baseline"), tiny_text, progress=False)
    damaged = shutil.copytree(tokens, tmp_path / "damaged")
    with open(damaged / "train.bin", "r+b") as handle:
        handle.write(np.array([1000], dtype=np.uint16).tobytes())
    assert main([*run, "--data", str(damaged)]) == 2
    assert re.match(r"error: '.*damaged/train.bin' holds token id 1000, but the vocabulary has 256 tokens",
                    capsys.readouterr().err)
    assert sorted(os.listdir(tmp_path)) == ["cache", "damaged"] and (tmp_path / "cache").read_text() == "mine"


@pytest.mark.parametrize("args, message", [
    (["--recipe", "cifar_baseline"], "task 'image_classification' trains with --strategy ddp"),
    (["--recipe", "gpt_baseline", "--set", "methods.ema={}"], "methods.ema does not work with --strategy fsdp"),
], ids=["images", "ema"])
def test_what_fsdp_cannot_shard_is_refused_before_anything_is_written(args, message, tmp_path, capsys):
    assert main([*args, "--strategy", "fsdp", "--out", str(tmp_path / "run")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_ema_and_layer_freezing_apply_to_a_language_model(tiny_text, reference_kernels):
    config = _tiny_config("gpt_baseline", "schedule.epochs=0.05", "methods.ema={'half_life_steps': 5}",
                          "methods.layer_freezing={'start': 0.5, 'level': 0.5}")
    data = prepare_text_data(config, tiny_text, progress=False)
    trainer = build_trainer(config, data=data, out=None, device=torch.device("cpu"), progress=False, eval_every=0)
    metrics = trainer.fit().metrics
    frozen = [name for name, p in trainer.model.named_parameters() if not p.requires_grad]
    assert frozen and "wte.weight" not in frozen, "the first layers froze, but not the embedding tied to the output"
    assert trainer.state.eval_model is not None and math.isfinite(metrics["eval_loss"])


def test_the_step_floor_times_a_language_model_on_its_first_batch(tiny_text, tmp_path, reference_kernels):
    from benchmarks import step_floor

    out = tmp_path / "floor"
    settings = [value for flag, value in zip(TINY[:-1:2], TINY[1::2]) if flag == "--set"]
    assert step_floor.main(["--recipe", "gpt_alibi", "--data", str(tiny_text), "--out", str(out), "--device", "cpu",
                            "--set", "schedule.epochs=0.05", *(f"--set={value}" for value in settings)]) == 0
    floor = json.loads((out / "summary.json").read_text())
    assert list(floor["sizes"]) == ["16"], "one shape: windows of the sequence length"
    assert floor["sizes"]["16"]["steps"] == floor["steps"] > 0 and floor["train_seconds"] > 0
