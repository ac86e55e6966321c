"""The ALiBi extrapolation experiment: corpus split, evaluation windows, models, and a tiny end-to-end run.

The end-to-end runs use the ALiBi kernel's PyTorch reference (this is about the
experiment, not the kernel, which tests/kernels covers) and a tiny model and corpus.
"""

import csv
import json
import math

import pytest
import torch

from fastcore_ops.kernels import backend
from training import alibi_extrapolation as extrapolation
from training.alibi_extrapolation import (
    CANNOT_RUN, RESULT_FILES, ExtrapolationConfig, batch_offsets, build_model, evaluation_windows, main,
    run_experiment, span_starts,
)
from training.text_corpus import load_corpus, source_files, split_by_file, stdlib_root


@pytest.fixture
def reference_kernels(monkeypatch):
    monkeypatch.setattr(backend, "INTERPRETING", False)


def write_tree(root, files: dict[str, bytes]):
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return root


def tiny_config(**overrides) -> ExtrapolationConfig:
    settings = dict(train_length=16, steps=3, batch_size=4, n_layer=1, n_head=2, n_embd=32, eval_spans=2,
                    eval_batch_tokens=64) | overrides
    return ExtrapolationConfig(**settings)


# ----------------------------------------------------------------------------------------
# Corpus
# ----------------------------------------------------------------------------------------


def test_source_files_are_sorted_and_skip_packages_tests_and_other_files(tmp_path):
    write_tree(tmp_path, {
        "zeta.py": b"z", "alpha.py": b"a", "pkg/mod.py": b"m", "pkg/tests/test_mod.py": b"t",
        "test/test_x.py": b"t", "site-packages/thirdparty.py": b"s", "idlelib/idle_test/t.py": b"t",
        "README.txt": b"r", "pkg/data.pyc": b"c",
    })
    assert source_files(tmp_path) == ["alpha.py", "pkg/mod.py", "zeta.py"]
    with pytest.raises(ValueError, match="root must be an existing directory, got '.*missing'"):
        source_files(tmp_path / "missing")


def test_split_sends_every_tenth_file_to_validation():
    names = [f"f{i:02d}.py" for i in range(25)]
    train, validation = split_by_file(names, validation_every=10)
    assert validation == ["f09.py", "f19.py"]
    assert train == [n for n in names if n not in ("f09.py", "f19.py")]
    with pytest.raises(ValueError, match="validation_every must be an int >= 2, got 1"):
        split_by_file(names, validation_every=1)


def test_corpus_bytes_are_the_split_files_concatenated_in_path_order(tmp_path):
    contents = {f"m{i:02d}.py": f"# file {i}\n".encode() * (i + 1) for i in range(12)}
    corpus = load_corpus(write_tree(tmp_path, contents), validation_every=10)
    assert corpus.validation_files == ("m09.py",)
    expected_train = b"".join(contents[n] for n in sorted(contents) if n != "m09.py")
    assert bytes(corpus.train.tolist()) == expected_train
    assert bytes(corpus.validation.tolist()) == contents["m09.py"]
    assert corpus.summary()["train_bytes"] == len(expected_train)
    with pytest.raises(ValueError, match="holds 3 .py file"):
        load_corpus(write_tree(tmp_path / "small", {"a.py": b"a", "b.py": b"b", "c.py": b"c"}))


def test_stdlib_split_is_deterministic_disjoint_and_covers_every_file():
    root = stdlib_root()
    files = source_files(root)
    assert files == source_files(root) and files == sorted(files)
    assert "os.py" in files and "json/decoder.py" in files
    assert not any(part in ("site-packages", "test", "tests") for name in files for part in name.split("/"))
    train, validation = split_by_file(files, 10)
    assert set(train).isdisjoint(validation) and sorted(train + validation) == files
    assert len(validation) == len(files) // 10


# ----------------------------------------------------------------------------------------
# Evaluation windows and training batches
# ----------------------------------------------------------------------------------------


def test_evaluation_windows_predict_the_same_tokens_at_every_length_without_overlap():
    data = torch.arange(1000)  # every value names its position
    # Spans of 33 tokens at 0, 483, 966: (1000 - 33) // 2 apart.
    expected_inputs = sorted(s + i for s in (0, 483, 966) for i in range(32))
    for length in (4, 8, 16, 32):
        inputs, targets = evaluation_windows(data, length, longest=32, spans=3)
        assert inputs.shape == targets.shape == (3 * 32 // length, length)
        assert sorted(inputs.flatten().tolist()) == expected_inputs  # each position once: no overlap
        assert torch.equal(targets, inputs + 1)
        assert torch.equal(inputs.diff(dim=1), torch.ones(len(inputs), length - 1, dtype=inputs.dtype))
    with pytest.raises(ValueError, match="length must divide longest, got length=5, longest=32"):
        evaluation_windows(data, 5, longest=32, spans=3)


def test_span_starts_refuse_a_text_too_short():
    assert span_starts(100, 10, 1).tolist() == [0]
    with pytest.raises(ValueError, match="3 validation spans of 40 bytes need 120 bytes, but the validation text has 100"):
        span_starts(100, 40, 3)


def test_batch_offsets_are_seeded_and_keep_windows_inside_the_text():
    config = tiny_config(steps=50, batch_size=8)
    offsets = batch_offsets(40, config)
    assert torch.equal(offsets, batch_offsets(40, config))
    assert not torch.equal(offsets, batch_offsets(40, tiny_config(steps=50, batch_size=8, seed=1)))
    assert offsets.min() >= 0 and offsets.max() + 16 + 1 <= 40
    assert offsets.max() == 40 - 17  # the last window is reachable
    with pytest.raises(ValueError, match="has 17 bytes, too few for windows of train_length=16"):
        batch_offsets(17, config)


# ----------------------------------------------------------------------------------------
# Models, options, end to end
# ----------------------------------------------------------------------------------------


def test_alibi_model_is_the_learned_model_operated_on(reference_kernels):
    config = tiny_config()
    learned, alibi = build_model(config, "learned"), build_model(config, "alibi")
    assert alibi.wpe is None and alibi.config.position == "alibi" and learned.config.position == "learned"
    learned_state = {k: v for k, v in learned.state_dict().items() if not k.startswith("wpe.")}
    assert learned_state.keys() == alibi.state_dict().keys()
    assert all(torch.equal(v, alibi.state_dict()[k]) for k, v in learned_state.items())
    alibi(torch.zeros(1, 8 * 16, dtype=torch.long))  # runs beyond the length it was built for


@pytest.mark.parametrize("argv,message", [
    (["--steps", "0"], "steps must be an int >= 1, got 0"),
    (["--train-length", "1"], "train_length must be an int >= 2, got 1"),
    (["--n-embd", "30", "--n-head", "4"], "n_embd must be divisible by n_head"),
    (["--device", "tpu"], "device must be 'cpu', 'cuda' or 'cuda:N', got 'tpu'"),
])
def test_bad_options_stop_with_a_clear_message(argv, message, capsys):
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2 and message in capsys.readouterr().err


@pytest.fixture
def tiny_corpus(tmp_path):
    """20 files of 600 bytes: 2 validation files, room for 2 spans of 8 * 16 + 1 bytes."""
    text = "".join(f"def f{i}(x):\n    return x * {i} + {i % 7}\n" for i in range(400)).encode()
    return load_corpus(write_tree(tmp_path / "src", {f"m{i:02d}.py": text[i * 600:(i + 1) * 600] for i in range(20)}))


def test_tiny_run_writes_every_file_and_only_alibi_runs_beyond_the_training_length(tmp_path, tiny_corpus,
                                                                                  reference_kernels):
    corpus, out = tiny_corpus, tmp_path / "out"
    results = run_experiment(tiny_config(), out, corpus=corpus, progress=False)

    assert all((out / name).is_file() and (out / name).stat().st_size > 0 for name in RESULT_FILES)
    assert json.loads((out / "results.json").read_text())["rows"] == results["rows"]
    rows = {(row["model"], int(row["length"])): row for row in csv.DictReader(open(out / "results.csv"))}
    assert set(rows) == {(model, length) for model in ("learned", "alibi") for length in (16, 32, 64, 128)}
    assert rows[("learned", 16)]["status"] == "ok"
    for length in (32, 64, 128):
        assert rows[("learned", length)]["status"] == CANNOT_RUN and rows[("learned", length)]["loss"] == ""
    for length in (16, 32, 64, 128):
        alibi = rows[("alibi", length)]
        assert alibi["status"] == "ok" and math.isfinite(float(alibi["loss"]))
        assert float(alibi["loss"]) < math.log(256) + 0.5  # near uniform or better after 3 steps
        assert int(alibi["predicted_tokens"]) == 2 * 128  # the same tokens at every length
    # At the training length, every window is its own last train_length positions.
    assert rows[("alibi", 16)]["loss"] == rows[("alibi", 16)]["last_window_loss"]
    assert results["models"]["alibi"]["parameters"] == results["models"]["learned"]["parameters"] - 16 * 32


def test_command_line_prints_the_table(tmp_path, tiny_corpus, reference_kernels, monkeypatch, capsys):
    monkeypatch.setattr(extrapolation, "load_stdlib_corpus", lambda: tiny_corpus)
    main(["--train-length", "16", "--steps", "2", "--batch-size", "4", "--n-layer", "1", "--n-head", "2",
          "--n-embd", "32", "--eval-spans", "2", "--out", str(tmp_path / "cli"), "--no-progress"])
    printed = capsys.readouterr().out
    assert "18 training files" in printed and "2 validation files" in printed
    table = [line.split() for line in printed.splitlines() if line.startswith(("learned ", "alibi "))]
    assert [(row[0], row[1]) for row in table] == [(m, str(n)) for m in ("learned", "alibi") for n in (16, 32, 64, 128)]
    assert sum(" ".join(row).endswith(CANNOT_RUN) for row in table) == 3
    assert (tmp_path / "cli" / "extrapolation.png").is_file()
