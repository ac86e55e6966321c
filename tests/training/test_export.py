"""``python -m fastcore_ops.training.export`` and ``load_model``: a run's evaluated weights out as a plain state dict, and back.

Each run trains 5 steps on ``micro_cifar``'s 20 images (a language model: 4 steps on ``micro_text``), in this
process, so that the test holds the run's own evaluated model to compare the export with.
"""

import dataclasses
import errno
import json
import os
import shutil

import pytest
import safetensors.torch
import torch

from fastcore_ops.kernels import backend
from fastcore_ops.training import checkpoint
from fastcore_ops.training.assemble import build_trainer
from fastcore_ops.training.config import override, to_dict
from fastcore_ops.training.export import folder, load_model
from fastcore_ops.training.export.cli import main
from fastcore_ops.training.methods.ema import EMA
from fastcore_ops.training.methods.swa import SWA
from fastcore_ops.training.models import build_model
from fastcore_ops.training.models.language import logits_of
from fastcore_ops.training.recipes import get_recipe
from fastcore_ops.training.run_folder import RunSettings, write_run
from fastcore_ops.training.tasks.language import prepare_text_data

TINY = ["data.batch_size=4", "schedule.epochs=1", "schedule.warmup_epochs=0", "data.num_workers=0"]
TINY_GPT = ["model.options={'n_layer': 1, 'n_head': 2, 'n_embd': 32}", "text.sequence_length=16",
            "text.eval_batch_tokens=256", "data.batch_size=8", "schedule.warmup_epochs=0", "schedule.epochs=0.2"]


@pytest.fixture(scope="module", autouse=True)
def reference_kernels():
    """The kernels' PyTorch references, not Triton's interpreter (tests/kernels checks the kernels): seconds a run."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(backend, "INTERPRETING", False)
        yield


def _train(data, out, recipe="cifar_baseline", assignments=TINY):
    """A run trained in this process, its folder as ``python -m fastcore_ops.training.train`` leaves it; its trainer."""
    config = override(get_recipe(recipe), list(assignments))
    trainer = build_trainer(config, data=data, out=out, device=torch.device("cpu"), progress=False)
    write_run(out, config, RunSettings())
    try:
        trainer.fit()
    finally:
        trainer.train_loader.close()
        trainer.task.close()
    return trainer


def _evaluated(trainer) -> torch.nn.Module:
    return (trainer.state.eval_model or trainer.model).eval()


@pytest.fixture(scope="module")
def plain_run(micro_cifar, tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "plain"
    return out, _train(micro_cifar, out)


def _images() -> torch.Tensor:
    return torch.randn(4, 3, 32, 32, generator=torch.Generator().manual_seed(0))


def _assert_same_weights(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for name, tensor in want.items():
        assert torch.equal(got[name], tensor), name


@pytest.mark.parametrize("weights_format", ["safetensors", "pt"])
def test_an_export_loads_as_a_plain_state_dict_and_as_the_run_s_model(weights_format, plain_run, tmp_path, capsys):
    run, trainer = plain_run
    out = tmp_path / "export"
    assert main([str(run), "--out", str(out), "--format", weights_format]) == 0
    assert "model.json" in capsys.readouterr().out
    evaluated = _evaluated(trainer)
    if weights_format == "safetensors":
        plain = safetensors.torch.load_file(out / "model.safetensors")
    else:
        plain = torch.load(out / "model.pt", weights_only=True)
    _assert_same_weights(plain, evaluated.state_dict())
    model = load_model(out)
    assert not model.training
    with torch.no_grad():
        torch.testing.assert_close(model(_images()), evaluated(_images()))
    info = json.loads((out / "model.json").read_text())
    payload = checkpoint.load(run / "checkpoint.pt")
    assert info == {"task": "image_classification", "model": "cifar_resnet20", "num_classes": 10,
                    "format": weights_format, "weights_from": "model", "step": 5, "metrics": payload["final"]}
    assert (out / "config.json").read_text() == (run / "config.json").read_text()
    assert sorted(path.name for path in out.iterdir()) == sorted([".fastcore_ops-export", "config.json", "model.json",
                                                                  folder.FORMATS[weights_format].file_name])


@pytest.mark.parametrize("method", ["ema", "swa"])
def test_an_averaging_run_exports_the_average_it_evaluated(method, micro_cifar, tmp_path):
    options = {"ema": "{'half_life_steps': 2}", "swa": "{'start': 0.5}"}[method]
    trainer = _train(micro_cifar, tmp_path / "run", assignments=[*TINY, f"methods.{method}={options}"])
    averaged = trainer.state.eval_model
    assert averaged is not None and averaged is not trainer.model
    assert main([str(tmp_path / "run"), "--out", str(tmp_path / "export")]) == 0
    exported = safetensors.torch.load_file(tmp_path / "export" / "model.safetensors")
    _assert_same_weights(exported, averaged.state_dict())
    raw = trainer.model.state_dict()
    assert any(not torch.equal(exported[name], raw[name]) for name in raw), "the average is not the trained weights"
    with torch.no_grad():
        torch.testing.assert_close(load_model(tmp_path / "export")(_images()), averaged.eval()(_images()))
    assert f'"weights_from": "{method.upper()}"' in (tmp_path / "export" / "model.json").read_text()


def test_swa_gives_its_average_only_once_the_run_finished_and_ema_from_the_start():
    saved = {"averaged_model": {"module.weight": torch.ones(2), "n_averaged": torch.tensor(1)}}
    swa = SWA(start_fraction=0.5, end_fraction=1.0, swa_lr=0.01)
    assert swa.evaluated_weights(saved, finished=False) is None
    assert swa.evaluated_weights(saved, finished=True).keys() == {"weight"}
    assert EMA(half_life_steps=2).evaluated_weights(saved, finished=False).keys() == {"weight"}
    assert EMA(half_life_steps=2).evaluated_weights({}, finished=False) is None, "a run saved before it started"


def test_a_run_with_a_surgery_is_rebuilt_with_it(micro_cifar, tmp_path):
    trainer = _train(micro_cifar, tmp_path / "run", assignments=[*TINY, "methods.blurpool={}"])
    assert main([str(tmp_path / "run"), "--out", str(tmp_path / "export")]) == 0
    model = load_model(tmp_path / "export")
    assert [type(module) for module in model.modules()] == [type(module) for module in trainer.model.modules()]
    assert any(type(module).__name__ == "BlurConv2d" for module in model.modules())
    assert model.state_dict().keys() != build_model("cifar_resnet20", 10).state_dict().keys()
    with torch.no_grad():
        torch.testing.assert_close(model(_images()), _evaluated(trainer)(_images()))


def test_a_language_model_is_exported_with_its_vocabulary_and_tied_embeddings(micro_text, tmp_path):
    config = override(get_recipe("gpt_alibi"), TINY_GPT)
    trainer = _train(prepare_text_data(config, micro_text, progress=False), tmp_path / "run", "gpt_alibi", TINY_GPT)
    assert main([str(tmp_path / "run"), "--out", str(tmp_path / "export")]) == 0
    assert '"vocab_size": 256' in (tmp_path / "export" / "model.json").read_text()
    tokens = torch.randint(0, 256, (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        got, want = load_model(tmp_path / "export")(tokens), _evaluated(trainer)(tokens)
    torch.testing.assert_close(logits_of(got), logits_of(want))


# -- refusals: exit 2, one error: line, --out untouched ----------------------------------------------------------


def _refused(argv, capsys) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def _flip_bytes(run):
    path = run / "checkpoint.pt"
    data = path.read_bytes()
    path.write_bytes(data[:-60] + bytes(60))


def _link_checkpoint_out(run):
    outside = run.parent / "elsewhere.pt"
    (run / "checkpoint.pt").rename(outside)
    (run / "checkpoint.pt").symlink_to(outside)


def _other_surgeries(run):
    config = override(get_recipe("cifar_baseline"), [*TINY, "methods.blurpool={}"])
    (run / "config.json").write_text(json.dumps(to_dict(config)))


DAMAGES = {
    "no-checkpoint": (lambda run: [path.unlink() for path in run.glob("checkpoint*.pt")], "no checkpoint yet"),
    "damaged-checkpoint": (_flip_bytes, "is corrupted"),
    "checkpoint-linked-out": (_link_checkpoint_out, "is a symbolic link"),
    "no-config": (lambda run: (run / "config.json").unlink(), "config.json: no such file"),
    "weights-of-another-model": (_other_surgeries, "do not fit cifar_resnet20"),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_run_that_cannot_be_exported_is_refused_naming_the_file(damage, plain_run, tmp_path, capsys):
    run = shutil.copytree(plain_run[0], tmp_path / "run")
    spoil, said = DAMAGES[damage]
    spoil(run)
    err = _refused([str(run), "--out", str(tmp_path / "export")], capsys)
    assert said in err and str(run) in err
    assert sorted(path.name for path in tmp_path.iterdir() if path.name != "elsewhere.pt") == ["run"]


@pytest.mark.parametrize("run, flags, said", [
    ("plain", ["--format", "onnx"], "--format onnx: no such format; known: safetensors, pt"),
    ("nowhere", [], "RUN_FOLDER"),
], ids=["unknown-format", "missing-run-folder"])
def test_bad_arguments_are_refused_before_anything_is_written(run, flags, said, plain_run, tmp_path, capsys):
    folder_given = plain_run[0] if run == "plain" else tmp_path / run
    assert said in _refused([str(folder_given), "--out", str(tmp_path / "export"), *flags], capsys)
    assert not (tmp_path / "export").exists()


def test_an_out_holding_files_the_export_did_not_write_is_refused_and_left_alone(plain_run, tmp_path, capsys):
    out = tmp_path / "export"
    out.mkdir()
    (out / "model.json").write_text("mine")
    assert "did not write" in _refused([str(plain_run[0]), "--out", str(out)], capsys)
    assert [path.name for path in out.iterdir()] == ["model.json"] and (out / "model.json").read_text() == "mine"


def test_an_earlier_export_is_replaced_and_nothing_else_in_its_folder(plain_run, tmp_path):
    out = tmp_path / "export"
    assert main([str(plain_run[0]), "--out", str(out)]) == 0
    (out / "notes.txt").write_text("mine")
    assert main([str(plain_run[0]), "--out", str(out), "--format", "pt"]) == 0
    assert sorted(path.name for path in out.iterdir()) == [".fastcore_ops-export", "config.json", "model.json",
                                                          "model.pt", "notes.txt"]
    assert (out / "notes.txt").read_text() == "mine"
    load_model(out)


def _full_disk(weights, path):
    path.write_bytes(b"half")
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("earlier", [False, True], ids=["new-out", "earlier-export"])
def test_a_failure_while_writing_leaves_nothing_half_written(earlier, plain_run, tmp_path, capsys, monkeypatch):
    out = tmp_path / "export"
    if earlier:
        assert main([str(plain_run[0]), "--out", str(out)]) == 0
    before = {path.name: path.read_bytes() for path in out.iterdir()} if earlier else None
    failing = dataclasses.replace(folder.FORMATS["safetensors"], save=_full_disk)
    monkeypatch.setitem(folder.FORMATS, "safetensors", failing)
    assert "No space left on device" in _refused([str(plain_run[0]), "--out", str(out)], capsys)
    assert [path.name for path in tmp_path.iterdir()] == (["export"] if earlier else [])
    if earlier:
        assert {path.name: path.read_bytes() for path in out.iterdir()} == before


# -- load_model on a folder from elsewhere ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def exported(plain_run, tmp_path_factory):
    out = tmp_path_factory.mktemp("exports") / "plain"
    assert main([str(plain_run[0]), "--out", str(out)]) == 0
    return out


def _set_info(out, **fields):
    info = json.loads((out / "model.json").read_text()) | fields
    (out / "model.json").write_text(json.dumps(info))


def _link_weights_out(out):
    (out / "model.safetensors").rename(out.parent / "elsewhere.safetensors")
    (out / "model.safetensors").symlink_to(out.parent / "elsewhere.safetensors")


TAMPERED = {
    "other-class-count": (lambda out: _set_info(out, num_classes=100), "do not fit cifar_resnet20 with num_classes"),
    "unknown-format": (lambda out: _set_info(out, format="pickle"), "format must be one of safetensors, pt"),
    "other-model": (lambda out: _set_info(out, model="resnet50"), "but config.json beside it says 'cifar_resnet20'"),
    "weights-linked-out": (_link_weights_out, "is a symbolic link"),
    "truncated-weights": (lambda out: (out / "model.safetensors").write_bytes(b"\x08"), "cannot be read"),
}


@pytest.mark.parametrize("tamper", TAMPERED)
def test_load_model_refuses_a_tampered_export_naming_the_file(tamper, exported, tmp_path):
    out = shutil.copytree(exported, tmp_path / "export")
    change, said = TAMPERED[tamper]
    change(out)
    with pytest.raises(ValueError, match=said) as refused:
        load_model(out)
    assert str(out) in str(refused.value)
