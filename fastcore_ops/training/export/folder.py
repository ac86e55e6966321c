"""An export folder: a run's weights as a plain state dict, its configuration, and what rebuilding its model needs.

``python -m fastcore_ops.training.export`` writes (:func:`write_export`)::

    model.safetensors      the weights ({name: tensor}; model.pt with --format pt)
    config.json            the run's configuration, as fastcore_ops.training.config.load_config reads it
    model.json             {"task", "model", "num_classes" or "vocab_size", "format", "weights_from", "step", "metrics"}
    .fastcore_ops-export   the marker that lets a later export replace these files

and :func:`load_model` rebuilds the model from them. A folder may come from anyone: its files are read only where
they are regular files directly inside it, ``model.json`` field by field, the weights without unpickling anything
but tensors.

    >>> model = load_model("exports/mild")        # doctest: +SKIP
    >>> model(torch.randn(1, 3, 32, 32)).shape    # doctest: +SKIP
    torch.Size([1, 10])
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import safetensors.torch
import torch
from safetensors import SafetensorError
from torch import nn

from fastcore_ops.data.shards import JsonFields
from fastcore_ops.owned_folder import check_claimable, claim_folder
from fastcore_ops.training.config import TrainConfig, load_config, to_dict
from fastcore_ops.training.methods.registry import plan_methods
from fastcore_ops.training.run_folder import CONFIG_NAME
from fastcore_ops.training.tasks.registry import task_named

TOOL = "export"
MODEL_INFO_NAME = "model.json"
_FIX = "export the run again: python -m fastcore_ops.training.export RUN_FOLDER --out DIR"


def _save_safetensors(weights: dict, path: Path) -> None:
    # "pt": the tensors are PyTorch's, which Hugging Face's readers look for.
    safetensors.torch.save_file(weights, path, metadata={"format": "pt"})


def _load_pt(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)


@dataclass(frozen=True)
class WeightsFormat:
    """How one ``--format`` writes a state dict and reads it back; ``damaged``: what its reader raises on a bad file."""

    file_name: str
    save: Callable[[dict, Path], None]
    load: Callable[[Path], object]
    damaged: tuple[type[Exception], ...]

    def read(self, path: Path) -> object:
        try:
            return self.load(path)
        except self.damaged as error:
            raise ValueError(f"{path} cannot be read as a {self.file_name} file ({error}); {_FIX}") from None


FORMATS = {
    "safetensors": WeightsFormat("model.safetensors", _save_safetensors, safetensors.torch.load_file,
                                 (SafetensorError,)),
    "pt": WeightsFormat("model.pt", torch.save, _load_pt, (pickle.UnpicklingError, RuntimeError, EOFError, ValueError)),
}


def plain_file(folder: Path, name: str, fix: str) -> Path:
    """``folder / name`` where it is a regular file, not a link (a folder from elsewhere may hold one leading out of
    it); FileNotFoundError or ValueError naming it and ``fix`` otherwise.

        >>> plain_file(Path("/nonexistent"), "model.json", "export the run")
        Traceback (most recent call last):
        ...
        FileNotFoundError: /nonexistent/model.json: no such file; export the run
    """
    path = folder / name
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file; {fix}") from None
    if stat.S_ISLNK(mode):
        raise ValueError(f"{path} is a symbolic link; only files inside {folder} are read: put the file itself there")
    if not stat.S_ISREG(mode):
        raise ValueError(f"{path} is not a regular file; {fix}")
    return path


def checked_weights(weights: object, source: Path) -> dict[str, torch.Tensor]:
    """``weights`` if it is a state dict (tensors by name); ValueError naming ``source`` otherwise."""
    if not isinstance(weights, dict) or not all(isinstance(name, str) and isinstance(value, torch.Tensor)
                                                for name, value in weights.items()):
        raise ValueError(f"{source} does not hold a state dict (tensors by name); only files written by "
                         f"python -m fastcore_ops.training.train or python -m fastcore_ops.training.export are read")
    return weights


def build(config: TrainConfig, size: int) -> nn.Module:
    """``config``'s model as its run built it, with ``size`` outputs: its task's
    :meth:`~fastcore_ops.training.tasks.base.Task.build_model`, with the run's surgeries."""
    return task_named(config.task).build_model(config, size, plan_methods(config).surgeries)


def rebuilt(config: TrainConfig, size: int, weights: dict[str, torch.Tensor], source: Path) -> nn.Module:
    """:func:`build`'s model holding ``weights`` (every name and shape must match), in eval mode; ValueError naming
    ``source`` and what differs where they do not fit."""
    model = build(config, size)
    expected = model.state_dict()
    differences = [f"{label} {', '.join(names[:3])}{' ...' if len(names) > 3 else ''}" for label, names in (
        ("missing", sorted(expected.keys() - weights.keys())), ("unexpected", sorted(weights.keys() - expected.keys())),
        ("of another shape", sorted(name for name in expected.keys() & weights.keys()
                                    if expected[name].shape != weights[name].shape))) if names]
    if differences:
        size_name = task_named(config.task).model_size_name
        raise ValueError(f"the weights in {source} do not fit {config.model.name} with {size_name} {size} and the "
                         f"run's surgeries: {'; '.join(differences)}")
    model.load_state_dict(weights)
    return model.eval()


def write_export(out: Path, weights: dict[str, torch.Tensor], config: TrainConfig, info: dict) -> None:
    """Write an export into ``out``: new, empty, or an earlier export (:mod:`fastcore_ops.owned_folder`).

    info: model.json's fields; its ``format`` picks the weights file. Every file is written into a folder beside
    ``out`` first, so a failure leaves ``out`` as it was: a new ``out`` then appears whole by one rename, an
    earlier export has its files replaced one by one, ``model.json`` last (a folder caught halfway lacks it).
    """
    weights_format = FORMATS[info["format"]]
    check_claimable(out, TOOL)
    absolute = Path(os.path.abspath(out))  # "." and "..": a real name to put the staging folder beside
    absolute.parent.mkdir(parents=True, exist_ok=True)
    staging = absolute.with_name(f".{absolute.name}.export-{os.getpid()}")
    staging.mkdir()  # not exist_ok: only a folder made here is removed below
    try:
        claim_folder(staging, TOOL)
        # Contiguous and sharing no memory (tied embeddings do): what safetensors stores, and a plain state dict.
        weights_format.save({name: tensor.detach().clone(memory_format=torch.contiguous_format)
                             for name, tensor in weights.items()}, staging / weights_format.file_name)
        (staging / CONFIG_NAME).write_text(json.dumps(to_dict(config), indent=2) + "\n")
        (staging / MODEL_INFO_NAME).write_text(json.dumps(info, indent=2) + "\n")
        if not absolute.exists():
            os.rename(staging, absolute)
            return
        (absolute / MODEL_INFO_NAME).unlink(missing_ok=True)
        for path in sorted(staging.iterdir(), key=lambda path: path.name == MODEL_INFO_NAME):
            os.replace(path, absolute / path.name)
        for other in FORMATS.values():  # an earlier export's weights in the other format
            if other is not weights_format:
                (absolute / other.file_name).unlink(missing_ok=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def load_model(folder: str | os.PathLike) -> nn.Module:
    """The model that ``python -m fastcore_ops.training.export`` wrote into ``folder``, rebuilt as its run built it (its
    surgeries included), holding the exported weights (loaded strictly), in eval mode, on the CPU.

    ValueError or FileNotFoundError naming the file for a folder that is not an export, or a damaged one.

        >>> from fastcore_ops.training.export import load_model
        >>> model = load_model("exports/mild")   # doctest: +SKIP
    """
    folder = Path(folder)
    fields = JsonFields(plain_file(folder, MODEL_INFO_NAME, _FIX), _FIX)
    info = fields.keys("", fields.parse(fields.text()), ("task", "model", "format"))
    config = load_config(plain_file(folder, CONFIG_NAME, _FIX))
    for key, value in (("task", config.task), ("model", config.model.name)):
        if fields.kind(key, info[key], str) != value:
            fields.fail(key, f"is {info[key]!r}, but {CONFIG_NAME} beside it says {value!r}")
    size_name = task_named(config.task).model_size_name
    size = fields.integer(size_name, fields.keys("", info, (size_name,))[size_name], low=1)
    weights_format = FORMATS.get(fields.kind("format", info["format"], str))
    if weights_format is None:
        fields.fail("format", f"must be one of {', '.join(FORMATS)}, got {info['format']!r}")
    path = plain_file(folder, weights_format.file_name, _FIX)
    return rebuilt(config, size, checked_weights(weights_format.read(path), path), path)
