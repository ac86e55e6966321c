"""``python -m fastcore_ops.training.alibi_extrapolation``: ALiBi, train short and test long.

Trains the project's small GPT twice on the trainer of ``python -m fastcore_ops.training.train``, on the
bytes of a text corpus (by default the standard library's source, :mod:`fastcore_ops.training.text.corpus`)
at a short length L: once with learned position embeddings, once made ALiBi by the ``alibi``
surgery. Both start from the very same weights (the ALiBi one lacks only the position table)
and see the very same batches. Then both are evaluated on all the validation tokens at lengths
L, 2L, 4L and 8L (every length predicts the same tokens); the learned model cannot run beyond
its table of L positions, which is reported as "cannot run".

    python -m fastcore_ops.training.alibi_extrapolation                       # defaults: L=128, about 10 CPU minutes
    python -m fastcore_ops.training.alibi_extrapolation --steps 50 --train-length 64 --out runs/alibi_quick

Writes ``results.json``, ``results.csv`` and ``extrapolation.png`` to ``--out`` (and each model's
run folder, ``learned/`` and ``alibi/``) and prints a table. On the CPU, leave
FASTCORE_OPS_INTERPRET at 0 (its default) so ALiBi attention runs its PyTorch reference rather
than Triton's interpreter; on a CPU shared with other jobs, also set OMP_WAIT_POLICY=PASSIVE:
spinning OpenMP threads then made training about 4x slower here.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from fastcore_ops import cli
from fastcore_ops.checks import check_int, check_number
from fastcore_ops.cli import check_device
from fastcore_ops.owned_folder import check_claimable, claim_folder
from fastcore_ops.surgery.alibi import ALiBiOptions
from fastcore_ops.training.assemble import build_trainer
from fastcore_ops.training.config import (DataConfig, MethodsConfig, ModelConfig, OptimizerConfig, ScheduleConfig,
                                          TextConfig, TrainConfig, validate)
from fastcore_ops.training.figures import plt
from fastcore_ops.training.tasks.language import CausalLanguageModeling, metric_suffix, prepare_text_data
from fastcore_ops.training.text.loader import TokenWindows
from fastcore_ops.training.text.prepare import load_prepared

MODELS = ("learned", "alibi")
CANNOT_RUN = "cannot run"
RESULT_FILES = ("results.json", "results.csv", "extrapolation.png")
TOOL = "alibi_extrapolation"  # the owner's name on its output folder (fastcore_ops.owned_folder)


@dataclass
class ExtrapolationConfig:
    train_length: int = 128  # L: training windows; evaluation at L * each of length_multiples
    # Sized so the whole command takes about 10 minutes on a 2-core CPU shared with other jobs
    # (about 4 with both cores to itself); train longer for lower losses, the comparison holds.
    steps: int = 350
    batch_size: int = 32
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    lr: float = 2e-3  # peak; small byte-level models train well this high (nanoGPT's char model: 1e-3)
    weight_decay: float = 0.1
    warmup_fraction: float = 0.05  # of steps, then cosine down to final_lr_fraction of the peak
    final_lr_fraction: float = 0.1
    grad_clip: float = 1.0
    length_multiples: tuple[int, ...] = (1, 2, 4, 8)
    seed: int = 0
    device: str = "cpu"

    def __post_init__(self):
        self.length_multiples = tuple(self.length_multiples)
        self.validate()

    @property
    def eval_lengths(self) -> list[int]:
        return [self.train_length * multiple for multiple in self.length_multiples]

    def validate(self) -> None:
        minimums = dict(train_length=2, steps=1, batch_size=1, n_layer=1, n_head=1, n_embd=1, seed=0)
        for name, minimum in minimums.items():
            check_int(name, getattr(self, name), low=minimum)
        for name in ("lr", "grad_clip"):
            check_number(name, getattr(self, name), low=0, low_open=True)
        for name in ("weight_decay", "warmup_fraction", "final_lr_fraction"):
            check_number(name, getattr(self, name), low=0, high=1)
        multiples = self.length_multiples
        for index, multiple in enumerate(multiples):
            check_int(f"length_multiples[{index}]", multiple, low=1)
        if not multiples or list(multiples) != sorted(set(multiples)) or multiples[0] != 1:
            raise ValueError(f"length_multiples must be increasing positive ints starting at 1, got {multiples!r}")
        check_device(self.device)
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd must be divisible by n_head, got n_embd={self.n_embd}, n_head={self.n_head}")


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
    """Train both models, evaluate them at every length, write :data:`RESULT_FILES` to ``out``.

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
                                device=check_device(config.device), progress=progress, eval_every=0)
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
    figure.savefig(path, dpi=120)
    plt.close(figure)


def format_table(results: dict) -> str:
    """The rows as an aligned text table."""
    header = f"{'model':<8} {'length':>6} {'x L':>4} {'loss':>8} {'bits/byte':>9}"
    lines = [header, "-" * len(header)]
    for row in results["rows"]:
        if row["status"] == "ok":
            numbers = f"{row['loss']:>8.4f} {row['bits_per_byte']:>9.4f}"
        else:
            numbers = f"{CANNOT_RUN:>8}"
        lines.append(f"{row['model']:<8} {row['length']:>6} {row['multiple']:>4} {numbers}")
    return "\n".join(lines)


def build_parser() -> cli.ArgumentParser:
    """The command line of ``python -m fastcore_ops.training.alibi_extrapolation``."""
    defaults = ExtrapolationConfig()
    parser = cli.ArgumentParser(prog="python -m fastcore_ops.training.alibi_extrapolation", description=cli.description(__doc__))
    parser.add_argument("--steps", type=int, default=defaults.steps, help="training steps per model")
    parser.add_argument("--train-length", type=int, default=defaults.train_length,
                        help="training window L in bytes; evaluation at L, 2L, 4L, 8L")
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size, help="training windows per step")
    parser.add_argument("--n-layer", type=int, default=defaults.n_layer, help="the GPT's transformer blocks")
    parser.add_argument("--n-head", type=int, default=defaults.n_head, help="attention heads per block")
    parser.add_argument("--n-embd", type=int, default=defaults.n_embd, help="the GPT's embedding width")
    parser.add_argument("--lr", type=float, default=defaults.lr, help="peak learning rate")
    parser.add_argument("--data", type=Path, help="a folder of text files (default: the standard library's source)")
    cli.add_device_option(parser)
    parser.add_argument("--seed", type=int, default=defaults.seed,
                        help="seed of the shared initial weights and of the batches")
    parser.add_argument("--out", type=Path, default=Path("runs/alibi_extrapolation"),
                        help="folder for the results, the plot and both models' run folders")
    cli.add_no_progress_option(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        config = ExtrapolationConfig(
            train_length=args.train_length, steps=args.steps, batch_size=args.batch_size, n_layer=args.n_layer,
            n_head=args.n_head, n_embd=args.n_embd, lr=args.lr, seed=args.seed,
            device=args.device)
        check_claimable(args.out, TOOL)
        results = run_experiment(config, args.out, data=args.data, progress=not args.no_progress)
    except cli.REFUSALS as error:
        return cli.refuse(error)
    corpus = results["corpus"]
    print(f"corpus: {corpus['root']}: {corpus['train_files']} training files ({corpus['train_bytes']:,} bytes), "
          f"{corpus['validation_files']} validation files ({corpus['validation_bytes']:,} bytes)")
    for kind, model in results["models"].items():
        print(f"{kind}: {model['parameters']:,} parameters, {model['steps']} steps, {model['seconds']:.0f} s training")
    print(f"validation: {results['evaluation']['predicted_tokens_per_length']:,} predicted bytes at every length")
    print(format_table(results))
    print(f"total {results['seconds']:.0f} s; wrote {', '.join(str(args.out / name) for name in RESULT_FILES)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
