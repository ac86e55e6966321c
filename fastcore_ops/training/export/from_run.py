"""What an export takes from a training run's folder: its configuration and the weights it evaluated, checked.

The weights are read from the run's newest checkpoint (``checkpoint.pt``) by :func:`fastcore_ops.training.checkpoint.load`,
which checks its checksum and fields and unpickles only tensors and plain containers. They are the weights the
run evaluated: an averaging method's where one became the evaluation model (EMA's, SWA's once the run finished:
:meth:`fastcore_ops.training.methods.base.Method.evaluated_weights`), else the model's. They must load into the model
:func:`fastcore_ops.training.export.folder.build` rebuilds, so an export that is written can be loaded.

    >>> export = read_run(Path("runs/mild"), "safetensors")   # doctest: +SKIP
    >>> export.info["weights_from"], export.info["num_classes"]  # doctest: +SKIP
    ('EMA', 10)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch

from fastcore_ops.training import checkpoint
from fastcore_ops.training.config import TrainConfig, load_config
from fastcore_ops.training.export.folder import build, checked_weights, plain_file, rebuilt
from fastcore_ops.training.methods.registry import plan_methods
from fastcore_ops.training.run_folder import CONFIG_NAME
from fastcore_ops.training.tasks.registry import task_named

_RUN_FIX = "pass the folder of a run python -m fastcore_ops.training.train wrote (its --out)"
_NO_CHECKPOINT = "the run has saved no checkpoint yet (one at each epoch's end, and every --checkpoint-every steps)"


@dataclass(frozen=True)
class RunExport:
    """A run's configuration, the weights it evaluated, and model.json's fields (:mod:`fastcore_ops.training.export.folder`)."""

    config: TrainConfig
    weights: dict[str, torch.Tensor]
    info: dict


def evaluated_weights(payload: dict, hooks: list, source: Path) -> tuple[dict[str, torch.Tensor], str]:
    """(the weights a run's checkpoint ``payload`` evaluated, whose: "model" or the averaging method's class name).

    hooks: the run's step methods, in its order (the last that gives weights wins, as in training).
    """
    weights, weights_from = payload["model"], "model"
    for hook in hooks:
        name = type(hook).__name__  # the trainer saves each method's state under its class's name
        saved = payload["methods"].get(name, {})
        if not isinstance(saved, dict):
            raise checkpoint.CheckpointError(f"{source}: the state saved for {name} is a {type(saved).__name__}, "
                                             f"not a dict; only files written by fastcore_ops.training.train are exported")
        try:
            averaged = hook.evaluated_weights(saved, payload["final"] is not None)
        except ValueError as error:
            raise checkpoint.CheckpointError(f"{source}: the state saved for {name} cannot be read: {error}") from None
        if averaged is not None:
            weights, weights_from = averaged, name
    return checked_weights(weights, source), weights_from


def trained_size(config: TrainConfig, weights: dict[str, torch.Tensor]) -> int:
    """The size the task's model was built at (num_classes, vocab_size): runs do not record it, their weights' shapes
    do. It is what ``weights`` hold where a model built at size 1 has a 1 they do not (1 where there is none).

        >>> from fastcore_ops.training.recipes import get_recipe
        >>> trained_size(get_recipe("cifar_baseline"), {"fc.bias": torch.zeros(7), "fc.weight": torch.zeros(7, 64)})
        7
    """
    with torch.device("meta"):  # shapes only: no memory, no initialization
        probe = build(config, 1).state_dict()
    sizes = {saved for name, tensor in probe.items() if name in weights
             for built, saved in zip(tensor.shape, weights[name].shape) if built == 1 and saved != 1}
    if len(sizes) > 1:
        raise ValueError(f"the weights hold {sorted(sizes)} where {config.model.name}'s "
                         f"{task_named(config.task).model_size_name} goes: they are not this model's")
    return sizes.pop() if sizes else 1


def _final_metrics(final: dict | None, source: Path) -> dict | None:
    if final is None:
        return None
    if not all(isinstance(name, str) and type(value) in (int, float) for name, value in final.items()):
        raise checkpoint.CheckpointError(f"{source}: its final metrics are not numbers by name; only files written "
                                         f"by fastcore_ops.training.train are exported")
    # JSON has no NaN or infinity (a diverged run's loss): such a metric is written as null.
    return {name: value if math.isfinite(value) else None for name, value in final.items()}


def read_run(run: Path, weights_format: str) -> RunExport:
    """The export of the run in ``run`` (see the module's docstring), checked before anything is written:
    FileNotFoundError, ValueError or :class:`~fastcore_ops.training.checkpoint.CheckpointError` naming the file otherwise.

    weights_format: model.json's ``format`` (a key of :data:`fastcore_ops.training.export.folder.FORMATS`).
    """
    if not run.is_dir():
        raise FileNotFoundError(f"RUN_FOLDER {run}: no such folder; {_RUN_FIX}")
    config = load_config(plain_file(run, CONFIG_NAME, _RUN_FIX))
    path = plain_file(run, checkpoint.CHECKPOINT_NAME, _NO_CHECKPOINT)
    payload = checkpoint.load(path, checkpoint.RUN_LAYOUT)
    weights, weights_from = evaluated_weights(payload, plan_methods(config).hooks, path)
    try:
        size = trained_size(config, weights)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
    rebuilt(config, size, weights, path)  # what load_model will do: weights that do not fit are refused now
    task = task_named(config.task)
    info = {"task": config.task, "model": config.model.name, task.model_size_name: size, "format": weights_format,
            "weights_from": weights_from, "step": payload["step"], "metrics": _final_metrics(payload["final"], path)}
    return RunExport(config, weights, info)
