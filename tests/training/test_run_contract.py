"""``python -m fastcore_ops.training.train``'s contract with its run folder: a refused or failed start leaves ``--out``
as it was, a stranger's files are never touched, and ``--resume`` continues only the same run
(the same data, the same number of processes)."""

import json
import shutil
from pathlib import Path

import pytest

from fastcore_ops.data.prepare import PrepareSettings
from fastcore_ops.data.shard_writer import prepare_shards
from fastcore_ops.training import checkpoint
from fastcore_ops.training.train import main
from fastcore_ops.training.trainer import Trainer
from tests.training.test_language_model import TINY as TINY_TEXT

TINY_IMAGES = ["--recipe", "cifar_baseline", "--epochs", "1", "--set", "data.batch_size=4",
               "--set", "data.num_workers=0", "--eval-every", "0", "--no-progress"]


def snapshot(folder: Path) -> dict | None:
    """Every file under ``folder`` with its bytes (None when the folder does not exist)."""
    if not folder.exists():
        return None
    return {str(path.relative_to(folder)): path.read_bytes() if path.is_file() else None
            for path in sorted(folder.rglob("*"))}


def refused(argv: list[str], capsys) -> str:
    """The one error line of a command that must exit 2 without a traceback."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.fixture(scope="module")
def prepared_cifar(micro_cifar, tmp_path_factory):
    root = tmp_path_factory.mktemp("prepared")
    for split in ("train", "test"):
        prepare_shards(micro_cifar / split, root / split, PrepareSettings(max_side=32, shard_size=8), workers=1,
                       progress=False)
    return root


def _missing_eval_shard(prepared_cifar, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(prepared_cifar, data)
    (data / "test" / "shard-000000.tar").unlink()
    return ["--data", str(data)]


def _label_out_of_range(prepared_cifar, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(prepared_cifar, data)
    index = json.loads((data / "train" / "index.json").read_text())
    index["shards"][0]["members"][0][3] = 10  # [key, offset, size, label]; 10 classes: labels 0-9
    (data / "train" / "index.json").write_text(json.dumps(index))
    return ["--data", str(data)]


def _stranger_file_named_like_a_run_file(micro_cifar, out):
    out.mkdir(parents=True)
    (out / "curves.png").write_bytes(b"my own plot")
    return ["--data", str(micro_cifar)]


@pytest.mark.parametrize("case", ["no-data", "out-is-a-file", "stranger-curves-png", "bad-value", "unknown-model",
                                  "missing-eval-shard", "label-out-of-range", "epochs-1e999", "epochs-flag-1e999",
                                  "lr-1e999"])
def test_a_refused_start_leaves_out_as_it_was(case, micro_cifar, prepared_cifar, tmp_path, capsys):
    out = tmp_path / "parent" / "run"
    extra = {
        "no-data": lambda: [],
        "out-is-a-file": lambda: out.parent.mkdir() or out.write_text("not a folder") and ["--data", str(micro_cifar)],
        "stranger-curves-png": lambda: _stranger_file_named_like_a_run_file(micro_cifar, out),
        "bad-value": lambda: ["--data", str(micro_cifar), "--set", "optimizer.lr=-1"],
        "epochs-1e999": lambda: ["--data", str(micro_cifar), "--set", "schedule.epochs=1e999"],  # was OverflowError
        "lr-1e999": lambda: ["--data", str(micro_cifar), "--set", "optimizer.lr=1e999"],  # trained NaN, exited 0
        "epochs-flag-1e999": lambda: ["--data", str(micro_cifar), "--epochs", "1e999"],  # its message named --set
        "unknown-model": lambda: ["--data", str(micro_cifar), "--model", "resnet9000"],
        "missing-eval-shard": lambda: _missing_eval_shard(prepared_cifar, tmp_path),
        "label-out-of-range": lambda: _label_out_of_range(prepared_cifar, tmp_path),
    }[case]()
    before = snapshot(tmp_path / "parent")
    refused([*TINY_IMAGES, *extra, "--out", str(out)], capsys)
    assert snapshot(tmp_path / "parent") == before


@pytest.mark.parametrize("flag", ["--epochs", "--budget"])
def test_a_flag_that_overflows_to_inf_is_refused_naming_the_flag(flag, micro_cifar, tmp_path, capsys):
    err = refused([*TINY_IMAGES, "--data", str(micro_cifar), flag, "1e999", "--out", str(tmp_path / "run")], capsys)
    assert f"argument {flag}: must be a finite number, got '1e999'" in err and "--set" not in err


@pytest.mark.parametrize("error, exit_code", [(ValueError("the model cannot run these images"), 2),
                                               (RuntimeError("a bug"), None)], ids=["user-error", "crash"])
def test_a_start_that_fails_before_its_first_checkpoint_removes_what_it_wrote(error, exit_code, micro_cifar, tmp_path,
                                                                              monkeypatch, capsys):
    def fail_after_writing(self, resume=False):
        (self.out / "metrics.jsonl").write_text("{}\n")
        raise error

    monkeypatch.setattr(Trainer, "fit", fail_after_writing)
    out = tmp_path / "runs" / "run"
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "notes.txt").write_text("mine")
    if exit_code is None:
        with pytest.raises(RuntimeError, match="a bug"):
            main([*TINY_IMAGES, "--data", str(micro_cifar), "--out", str(out)])
    else:
        assert refused([*TINY_IMAGES, "--data", str(micro_cifar), "--out", str(out)], capsys) == \
            "error: the model cannot run these images\n"
    assert snapshot(tmp_path / "runs") == {"notes.txt": b"mine"}


def test_a_new_run_leaves_a_strangers_files_in_out_alone(micro_cifar, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    strangers = {"notes.txt": b"mine", "checkpoint.txt": b"not ours", "config.yaml": b"a: 1"}
    for name, data in strangers.items():
        (out / name).write_bytes(data)
    assert main([*TINY_IMAGES, "--data", str(micro_cifar), "--out", str(out)]) == 0
    assert all((out / name).read_bytes() == data for name, data in strangers.items())
    assert (out / "summary.json").is_file()


def test_keeping_older_checkpoints_never_overwrites_a_file_that_is_not_one(tmp_path):
    path = tmp_path / "checkpoint.pt"
    checkpoint.save_keeping({"step": 1}, path, keep=3)
    checkpoint.save_keeping({"step": 2}, path, keep=3)
    stranger = checkpoint.older(path, 2)
    stranger.write_bytes(b"a file of the user's that happens to carry this name")
    with pytest.raises(checkpoint.CheckpointError, match="checkpoint.2.pt is not a fastcore_ops checkpoint"):
        checkpoint.save_keeping({"step": 3}, path, keep=3)
    assert stranger.read_bytes().startswith(b"a file of the user's")
    assert [checkpoint.load(p)["step"] for p in (path, checkpoint.older(path, 1))] == [2, 1]


@pytest.fixture(scope="module")
def trained_image_run(micro_cifar, tmp_path_factory):
    """(images, finished run folder): trained once, copied by image_run for each test."""
    root = tmp_path_factory.mktemp("image-run")
    data = root / "cifar"
    shutil.copytree(micro_cifar, data, symlinks=False)  # micro_cifar links the shared files
    out = root / "run"
    assert main([*TINY_IMAGES, "--epochs", "2", "--data", str(data), "--out", str(out)]) == 0
    return data, out


@pytest.fixture
def image_run(trained_image_run, tmp_path):
    """A copy of the trained run and of its images, which the test may change (times of writing kept)."""
    copies = tmp_path / "cifar", tmp_path / "image-run"
    for original, copy in zip(trained_image_run, copies):
        shutil.copytree(original, copy)
    return copies


@pytest.mark.parametrize("change, message", [
    (lambda root: next((root / "train").glob("*/*")).unlink(), "train: 20 -> 19 files"),
    (lambda root: next((root / "test").glob("*/*")).write_bytes(b"\xff\xd8 replaced"), "eval: "),
], ids=["an-image-removed", "an-image-replaced"])
def test_resume_refuses_changed_images_naming_the_change(change, message, image_run, capsys):
    data, out = image_run
    change(data)
    before = snapshot(out)
    err = refused(["--resume", "--no-progress", "--data", str(data), "--out", str(out)], capsys)
    assert f"the data of the run in {out} changed since it started ({message}" in err
    assert snapshot(out) == before


def test_resume_refuses_a_replaced_corpus(micro_text, tmp_path, capsys):
    corpus = tmp_path / "corpus"
    shutil.copytree(micro_text, corpus)
    out = tmp_path / "gpt-run"
    assert main(["--recipe", "gpt_baseline", *TINY_TEXT, "--epochs", "0.1", "--data", str(corpus),
                 "--out", str(out)]) == 0
    first = sorted(corpus.iterdir())[0]
    first.write_bytes(first.read_bytes()[::-1])  # the same size, other text
    err = refused(["--resume", "--no-progress", "--data", str(corpus), "--out", str(out)], capsys)
    assert f"the data of the run in {out} changed since it started (train.bin: same size, other contents" in err


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_resume_refuses_more_processes_than_the_run_had(strategy, request, micro_text, tmp_path, monkeypatch, capsys):
    if strategy == "fsdp":  # FSDP shards language models only
        data, out = micro_text, tmp_path / "gpt-run"
        assert main(["--recipe", "gpt_alibi", *TINY_TEXT, "--epochs", "0.1", "--data", str(data),
                     "--out", str(out)]) == 0
    else:
        data, out = request.getfixturevalue("image_run")
    before = snapshot(out)
    # As torchrun starts each rank; refused before joining a process group.
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    err = refused(["--resume", "--no-progress", "--strategy", strategy, "--data", str(data), "--out", str(out)], capsys)
    assert "was trained by 1 process(es), this command starts 2" in err
    assert snapshot(out) == before


def test_a_checkpoint_past_the_end_of_the_run_it_resumes_is_refused(image_run, capsys):
    """A run saved before run.json held the data's fingerprint, resumed on fewer images: fewer steps than it took."""
    data, out = image_run
    payload = checkpoint.load(out / checkpoint.CHECKPOINT_NAME)
    checkpoint.save_atomic({**payload, "final": None, "step": 1000}, out / checkpoint.CHECKPOINT_NAME)
    (out / "summary.json").unlink()
    settings = json.loads((out / "run.json").read_text())
    (out / "run.json").write_text(json.dumps({key: settings[key] for key in ("subset", "eval_every")}))
    err = refused(["--resume", "--no-progress", "--data", str(data), "--out", str(out)], capsys)
    assert "is at step 1000, at or past this run's 10 steps: its data or number of processes changed" in err


@pytest.mark.parametrize("out_under", ["train/run", "train", ".", "link/run"],
                         ids=["a-class-folder", "train", "data-itself", "through-a-link"])
def test_an_out_inside_data_is_refused_before_anything_is_created(out_under, micro_cifar, tmp_path, capsys):
    data = tmp_path / "data"
    shutil.copytree(micro_cifar, data, symlinks=True)  # the links to the shared images, not the images
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "link").symlink_to(data / "train")
    out = (tmp_path / "elsewhere" / "link" / "run") if out_under == "link/run" else data / out_under
    before = snapshot(data)
    err = refused([*TINY_IMAGES, "--data", str(data), "--out", str(out)], capsys)
    assert f"--out {out} is inside --data {data}: the run's files would become part of the data it reads" in err
    assert snapshot(data) == before


def test_a_data_folder_inside_out_is_left_alone(micro_cifar, tmp_path):
    """The run writes only its own names at the top of --out, so data kept inside it trains and stays as it was."""
    out = tmp_path / "run"
    data = out / "data"
    shutil.copytree(micro_cifar, data, symlinks=True)
    before = snapshot(data)
    assert main([*TINY_IMAGES, "--data", str(data), "--out", str(out)]) == 0
    assert snapshot(data) == before and (out / "summary.json").is_file()


def test_resume_where_checkpoint_pt_is_a_directory_says_so(tmp_path, capsys):
    out = tmp_path / "run"
    (out / "checkpoint.pt").mkdir(parents=True)
    err = refused(["--resume", "--no-progress", "--data", str(tmp_path / "data"), "--out", str(out)], capsys)
    assert f"--resume: {out / 'checkpoint.pt'} is a directory, not a checkpoint file, so {out} holds no " \
           f"checkpoint" in err


@pytest.mark.parametrize("change, message", [
    (lambda payload: payload.pop("model"), "its payload lacks 'model'"),
    (lambda payload: payload.update(epoch="2"), "its 'epoch' is a str, not int"),
], ids=["no-model", "epoch-a-str"])
def test_a_checksummed_checkpoint_without_a_run_s_fields_is_refused_on_resume(change, message, image_run, capsys):
    data, out = image_run
    payload = checkpoint.load(out / checkpoint.CHECKPOINT_NAME)
    del payload["format_version"]
    change(payload)
    for path in checkpoint.existing(out / checkpoint.CHECKPOINT_NAME):  # the older one too: nothing to fall back on
        checkpoint.save_atomic(payload, path)  # a correct header and sha256
    err = refused(["--resume", "--no-progress", "--data", str(data), "--out", str(out)], capsys)
    assert f"{out / checkpoint.CHECKPOINT_NAME} is not a fastcore_ops checkpoint: {message}" in err
