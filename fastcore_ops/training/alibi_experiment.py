"""The experiment of ``python -m fastcore_ops.training.alibi_extrapolation``: train both models, evaluate them at
every length, write the results (the command, :mod:`fastcore_ops.training.alibi_extrapolation`, parses and
imports this after).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import sys
import time
from pathlib import Path

import torch

from fastcore_ops import cli
from fastcore_ops.owned_folder import claim_folder
from fastcore_ops.surgery.alibi import ALiBiOptions
from fastcore_ops.training.extrapolation_config import CANNOT_RUN, MODELS, TOOL, ExtrapolationConfig
from fastcore_ops.training.assemble import build_trainer
from fastcore_ops.training.config import (DataConfig, MethodsConfig, ModelConfig, OptimizerConfig, ScheduleConfig,
                                          TextConfig, TrainConfig, validate)
from fastcore_ops.training.figures import plt, save_figure
from fastcore_ops.training.tasks.language import CausalLanguageModeling, metric_suffix, prepare_text_data
from fastcore_ops.training.text.loader import TokenWindows
from fastcore_ops.training.text.tokens import load_prepared


def train_config(config: ExtrapolationConfig, kind: str, steps_per_epoch: int) -> TrainConfig:
    """The trainer's configuration of one model: ``learned``, or the same GPT after the ``alibi`` surgery.

    Example:
        >>> train_config(ExtrapolationConfig(), "alibi", steps_per_epoch=700).methods.alibi
        ALiBiOptions(max_sequence_length=8192)
    """
    if kind not in MODELS:
        raise ValueError(f"kind must be one of {MODELS}, got {kind!r}")
    epochs = config.steps / steps_per_epoch  # the trainer counts in epochs; this is exactly ``steps`` steps
    # The product's path: a learned-position model operated on, not GPT(position="alibi").
    alibi = ALiBiOptions(max_sequence_length=max(8192, config.eval_lengths[-1])) if kind == "alibi" else None
    # Learned positions stop at L: the longer lengths are reported as "cannot run" for it.
    multiples = config.length_multiples if kind == "alibi" else (1,)
    trained = TrainConfig(
        name=f"alibi_extrapolation_{kind}", task=CausalLanguageModeling.name, precision="fp32", seed=config.seed,
        model=ModelConfig(name="gpt", options={"n_layer": config.n_layer, "n_head": config.n_head,
                                               "n_embd": config.n_embd}),
        optimizer=OptimizerConfig(name="adamw", lr=config.lr, reference_batch=config.batch_size, betas=(0.9, 0.99),
                                  weight_decay=config.weight_decay, no_decay_norm_and_bias=True,
                                  grad_clip_norm=config.grad_clip),
        schedule=ScheduleConfig(epochs=epochs, warmup_epochs=config.warmup_fraction * epochs,
                                final_lr_fraction=config.final_lr_fraction),
        data=DataConfig(batch_size=config.batch_size),
        methods=MethodsConfig(alibi=alibi),
        text=TextConfig(sequence_length=config.train_length, eval_length_multiples=multiples,
                        eval_batch_tokens=max(65536, config.eval_lengths[-1])))
    validate(trained)
    return trained


def evaluation_rows(kind: str, metrics: dict[str, float], config: ExtrapolationConfig) -> list[dict]:
    """One row per evaluation length: validation loss and bits per byte, or status "cannot run".

    Example:
        >>> rows = evaluation_rows("learned", {"eval_loss": 1.2, "bits_per_byte": 1.73},
        ...                        ExtrapolationConfig(length_multiples=(1, 2)))
        >>> [(row["length"], row["status"]) for row in rows]
        [(128, 'ok'), (256, 'cannot run')]
    """
    rows = []
    for multiple in config.length_multiples:
        suffix = metric_suffix(multiple)
        ran = f"eval_loss{suffix}" in metrics
        rows.append({"model": kind, "length": multiple * config.train_length, "multiple": multiple,
                     "status": "ok" if ran else CANNOT_RUN, "loss": metrics.get(f"eval_loss{suffix}"),
                     "bits_per_byte": metrics.get(f"bits_per_byte{suffix}")})
    return rows


def run_experiment(config: ExtrapolationConfig, out: Path, *, data: Path | None = None,
                   progress: bool = True) -> dict:
    """Train both models, evaluate them at every length, write the command's RESULT_FILES to ``out``.

    data: a folder of text files or a prepared one (None: the standard library's source).

    Example:
        >>> results = run_experiment(ExtrapolationConfig(steps=20), Path("runs/alibi_quick"))  # doctest: +SKIP
        >>> [row["status"] for row in results["rows"] if row["model"] == "learned"]  # doctest: +SKIP
        ['ok', 'cannot run', 'cannot run', 'cannot run']
    """
    started = time.perf_counter()
    out = Path(out)
    base = train_config(config, "learned", steps_per_epoch=1)  # the text settings both runs share
    prepared = load_prepared(prepare_text_data(base, data, progress=progress))
    steps_per_epoch = len(TokenWindows(prepared.train, sequence_length=config.train_length,
                                       batch_size=config.batch_size, seed=config.seed))
    claim_folder(out, TOOL)  # both models' runs and the results go in it; a stranger's folder is refused
    models, rows = {}, []
    for kind in MODELS:
        trainer = build_trainer(train_config(config, kind, steps_per_epoch), data=prepared.folder, out=out / kind,
                                device=cli.check_device(config.device), progress=progress, eval_every=0)
        try:
            result = trainer.fit()
        finally:
            trainer.task.close()
        models[kind] = {"parameters": sum(p.numel() for p in trainer.model.parameters()),
                        "seconds": result.train_seconds, "steps": result.steps}
        rows += evaluation_rows(kind, result.metrics, config)
    meta = prepared.meta
    results = {
        "config": dataclasses.asdict(config),
        "corpus": {"root": meta["source_root"], "train_files": len(meta["train"]["files"]),
                   "validation_files": len(meta["validation"]["files"]), "train_bytes": meta["train"]["bytes"],
                   "validation_bytes": meta["validation"]["bytes"]},
        "evaluation": {"lengths": config.eval_lengths, "predicted_tokens_per_length": meta["validation"]["tokens"] - 1,
                       "loss_unit": "nats per byte"},
        "models": models,
        "rows": rows,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "seconds": time.perf_counter() - started,
    }
    write_results(results, out)
    return results


def write_results(results: dict, out: Path) -> None:
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    with open(out / "results.csv", "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(results["rows"][0]))
        writer.writeheader()
        writer.writerows({k: ("" if v is None else v) for k, v in row.items()} for row in results["rows"])
    plot_results(results, out / "extrapolation.png")


def plot_results(results: dict, path: Path) -> None:
    """Validation loss against evaluation length for both models, the training length marked."""
    train_length = results["config"]["train_length"]
    lengths = results["evaluation"]["lengths"]
    figure, axes = plt.subplots(figsize=(7, 4.5))
    for kind, color in zip(MODELS, ("tab:blue", "tab:orange")):
        ran = [row for row in results["rows"] if row["model"] == kind and row["status"] == "ok"]
        axes.plot([r["length"] for r in ran], [r["loss"] for r in ran], marker="o", color=color, label=kind)
        refused = [row["length"] for row in results["rows"] if row["model"] == kind and row["status"] != "ok"]
        for length in refused:
            axes.annotate(f"{kind}:\n{CANNOT_RUN}", (length, 0.55), xycoords=("data", "axes fraction"),
                          ha="center", color=color, fontsize=8)
    axes.axvline(train_length, color="gray", linestyle="--", label=f"training length {train_length}")
    axes.set_xscale("log", base=2)
    axes.set_xticks(lengths, [str(length) for length in lengths])
    axes.set_xlim(lengths[0] / 1.3, lengths[-1] * 1.3)  # room for the end labels on the log axis
    axes.set(xlabel="evaluation length (bytes)", ylabel="validation loss (nats / byte)",
             title="Train short, test long: learned positions vs ALiBi surgery")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    save_figure(figure, path)
