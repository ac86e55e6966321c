"""``python -m training.alibi_extrapolation``: ALiBi, train short and test long (issue 7).

Trains the project's small GPT twice on the standard library's source (bytes, see
:mod:`training.text_corpus`) at a short length L: once with learned position embeddings,
once made ALiBi by the ``alibi`` surgery. Both start from the very same weights (the
ALiBi one lacks only the position table) and see the very same batches. Then both are
evaluated on the same validation tokens at lengths L, 2L, 4L and 8L; the learned model
cannot run beyond its table of L positions, which is reported as "cannot run".

    python -m training.alibi_extrapolation                       # defaults: L=128, about 10 CPU minutes
    python -m training.alibi_extrapolation --steps 50 --train-length 64 --out runs/alibi_quick

Writes ``results.json``, ``results.csv`` and ``extrapolation.png`` to ``--out`` and prints a table.
On the CPU, leave FASTCORE_OPS_INTERPRET at 0 (its default) so ALiBi attention runs its
PyTorch reference rather than Triton's interpreter; on a CPU shared with other jobs, also set
OMP_WAIT_POLICY=PASSIVE: spinning OpenMP threads then made training about 4x slower here.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on servers and CI
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from torch.nn import functional as F  # noqa: E402
from tqdm import tqdm  # noqa: E402

from fastcore_ops import apply_surgery  # noqa: E402
from fastcore_ops.checks import check_int, check_number  # noqa: E402
from training.models.gpt import GPT, GPTConfig  # noqa: E402
from training.optim import parameter_groups, warmup_cosine  # noqa: E402
from training.text_corpus import ByteCorpus, load_stdlib_corpus  # noqa: E402

MODELS = ("learned", "alibi")
CANNOT_RUN = "cannot run"
RESULT_FILES = ("results.json", "results.csv", "extrapolation.png")


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
    # Validation spans of (longest length + 1) bytes, spread evenly over the validation text;
    # every evaluation length predicts exactly these spans' tokens.
    eval_spans: int = 48
    eval_batch_tokens: int = 4096  # tokens per evaluation forward pass, whatever the length
    seed: int = 0
    device: str = "cpu"

    def __post_init__(self):
        self.length_multiples = tuple(self.length_multiples)
        self.validate()

    @property
    def eval_lengths(self) -> list[int]:
        return [self.train_length * multiple for multiple in self.length_multiples]

    def validate(self) -> None:
        minimums = dict(train_length=2, steps=1, batch_size=1, n_layer=1, n_head=1, n_embd=1, eval_spans=1,
                        eval_batch_tokens=1, seed=0)
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
        if any(multiples[-1] % m for m in multiples):
            # Each span is cut into whole windows at every length, so all must divide the longest.
            raise ValueError(f"length_multiples must all divide the largest one, got {multiples!r}")
        check_device(self.device)
        # GPTConfig checks the model's own fields (n_embd divisible by n_head, ...).
        self.gpt_config("learned")

    def gpt_config(self, position: str) -> GPTConfig:
        return GPTConfig(vocab_size=256, max_sequence_length=self.train_length, n_layer=self.n_layer,
                         n_head=self.n_head, n_embd=self.n_embd, dropout=0.0, position=position)


def check_device(device: str) -> torch.device:
    """``device`` as a torch.device, refusing ones this machine does not have."""
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}") from error
    if parsed.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}")
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} was asked for, but CUDA is not available here; use --device cpu")
    return parsed


# ----------------------------------------------------------------------------------------
# Models and training
# ----------------------------------------------------------------------------------------


def build_model(config: ExtrapolationConfig, kind: str) -> GPT:
    """The ``learned`` GPT, or the same GPT (same seed, same weights) after the ``alibi`` surgery.

    Example:
        >>> alibi = build_model(ExtrapolationConfig(), "alibi")   # no wpe, ALiBi attention
    """
    if kind not in MODELS:
        raise ValueError(f"kind must be one of {MODELS}, got {kind!r}")
    # GPT initialises from the global generator: fork it so the caller's stream is untouched.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        model = GPT(config.gpt_config("learned"))
    if kind == "alibi":
        # The product's path: a learned-position model operated on, not GPT(position="alibi").
        apply_surgery(model, [("alibi", {"max_sequence_length": max(8192, config.eval_lengths[-1])})])
    return model.to(config.device)


def batch_offsets(train_tokens: int, config: ExtrapolationConfig) -> torch.Tensor:
    """(steps, batch_size) start offsets of the training windows, from a generator seeded by ``config.seed``.

    Each window needs length + 1 tokens (inputs and their next-byte targets).
    """
    highest = train_tokens - config.train_length - 1
    if highest < 1:
        raise ValueError(f"the training text has {train_tokens} bytes, too few for windows of "
                         f"train_length={config.train_length}")
    generator = torch.Generator().manual_seed(config.seed)
    return torch.randint(0, highest + 1, (config.steps, config.batch_size), generator=generator)


def train_model(model: GPT, train: torch.Tensor, config: ExtrapolationConfig, *, description: str = "training",
                progress: bool = True) -> dict:
    """AdamW with warmup and cosine decay on windows of ``train`` at offsets :func:`batch_offsets`.

    Returns ``{"seconds", "first_loss", "final_loss"}``, final_loss averaged over the last 10% of steps.
    """
    model.train()
    optimizer = torch.optim.AdamW(parameter_groups(model, config.weight_decay, no_decay_norm_and_bias=True),
                                  lr=config.lr, betas=(0.9, 0.99))
    scheduler = warmup_cosine(optimizer, warmup_steps=max(1, round(config.warmup_fraction * config.steps)),
                              total_steps=config.steps, final_fraction=config.final_lr_fraction)
    span = torch.arange(config.train_length + 1)
    losses = []
    started = time.perf_counter()
    bar = tqdm(batch_offsets(train.numel(), config), desc=description, unit="step", disable=not progress,
               dynamic_ncols=True)
    for offsets in bar:
        windows = train[offsets[:, None] + span].long().to(config.device)
        _, loss = model(windows[:, :-1], targets=windows[:, 1:])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
        bar.set_postfix(loss=f"{losses[-1]:.3f}", refresh=False)
    tail = losses[-max(1, len(losses) // 10):]
    return {"seconds": time.perf_counter() - started, "first_loss": losses[0], "final_loss": sum(tail) / len(tail)}


# ----------------------------------------------------------------------------------------
# Evaluation
# ----------------------------------------------------------------------------------------


def span_starts(total_tokens: int, span_tokens: int, count: int) -> torch.Tensor:
    """``count`` starts of non-overlapping spans of ``span_tokens``, spread evenly over ``total_tokens``.

    Example:
        >>> span_starts(100, 10, 4).tolist()
        [0, 30, 60, 90]
    """
    if count * span_tokens > total_tokens:
        raise ValueError(f"{count} validation spans of {span_tokens} bytes need {count * span_tokens} bytes, but "
                         f"the validation text has {total_tokens}; lower eval_spans or train_length")
    stride = (total_tokens - span_tokens) // max(1, count - 1) if count > 1 else 0
    return torch.arange(count) * stride


def evaluation_windows(data: torch.Tensor, length: int, longest: int, spans: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, targets), each (spans * longest / length, length): every span of ``longest + 1``
    tokens cut into consecutive windows of ``length``, so every length predicts the same tokens.

    Example:
        >>> inputs, targets = evaluation_windows(torch.arange(100), 4, 8, spans=2)
        >>> inputs.tolist()[:3], targets.tolist()[0]
        ([[0, 1, 2, 3], [4, 5, 6, 7], [91, 92, 93, 94]], [1, 2, 3, 4])
    """
    if longest % length:
        raise ValueError(f"length must divide longest, got length={length}, longest={longest}")
    starts = span_starts(data.numel(), longest + 1, spans)
    tokens = data[starts[:, None] + torch.arange(longest + 1)].long()  # (spans, longest + 1)
    return tokens[:, :-1].reshape(-1, length), tokens[:, 1:].reshape(-1, length)


def can_run(model: GPT, length: int) -> bool:
    """Whether the model accepts ``length`` tokens: learned positions stop at their table's size."""
    return model.config.position != "learned" or length <= model.config.max_sequence_length


@torch.no_grad()
def token_losses(model: GPT, inputs: torch.Tensor, targets: torch.Tensor, batch_tokens: int,
                 device: str = "cpu") -> torch.Tensor:
    """Per-token cross-entropy (nats), shaped like ``targets``, in batches of about ``batch_tokens``."""
    model.eval()
    per_batch = max(1, batch_tokens // inputs.shape[1])
    losses = []
    for chunk, chunk_targets in zip(inputs.split(per_batch), targets.split(per_batch)):
        logits, _ = model(chunk.to(device))
        losses.append(F.cross_entropy(logits.transpose(1, 2), chunk_targets.to(device), reduction="none").cpu())
    return torch.cat(losses)


def evaluate(model: GPT, kind: str, validation: torch.Tensor, config: ExtrapolationConfig) -> list[dict]:
    """One row per evaluation length: mean loss over all predicted tokens, and over each window's
    last ``train_length`` positions (the ones with the most context), or status "cannot run"."""
    rows = []
    for length in config.eval_lengths:
        row = {"model": kind, "length": length, "multiple": length // config.train_length, "status": CANNOT_RUN,
               "loss": None, "bits_per_byte": None, "last_window_loss": None, "predicted_tokens": 0}
        if can_run(model, length):
            inputs, targets = evaluation_windows(validation, length, config.eval_lengths[-1], config.eval_spans)
            losses = token_losses(model, inputs, targets, config.eval_batch_tokens, config.device)
            loss = losses.mean().item()
            row.update(status="ok", loss=loss, bits_per_byte=loss / math.log(2),
                       last_window_loss=losses[:, -config.train_length:].mean().item(), predicted_tokens=losses.numel())
        rows.append(row)
    return rows


# ----------------------------------------------------------------------------------------
# The experiment and its outputs
# ----------------------------------------------------------------------------------------


def run_experiment(config: ExtrapolationConfig, out: Path, *, corpus: ByteCorpus | None = None,
                   progress: bool = True) -> dict:
    """Train both models, evaluate them at every length, write :data:`RESULT_FILES` to ``out``.

    Example:
        >>> results = run_experiment(ExtrapolationConfig(steps=20), Path("runs/alibi_quick"))  # doctest: +SKIP
        >>> [row["status"] for row in results["rows"] if row["model"] == "learned"]  # doctest: +SKIP
        ['ok', 'cannot run', 'cannot run', 'cannot run']
    """
    started = time.perf_counter()
    corpus = load_stdlib_corpus() if corpus is None else corpus
    # Fail on a too-short validation text before minutes of training, not after.
    span_starts(corpus.validation.numel(), config.eval_lengths[-1] + 1, config.eval_spans)
    models, rows = {}, []
    for kind in MODELS:
        model = build_model(config, kind)
        models[kind] = {"parameters": model.num_parameters(), "position": model.config.position}
        models[kind].update(train_model(model, corpus.train, config, description=f"{kind:>7}", progress=progress))
        rows += evaluate(model, kind, corpus.validation, config)
    results = {
        "config": dataclasses.asdict(config),
        "corpus": corpus.summary(),
        "evaluation": {"lengths": config.eval_lengths, "spans": config.eval_spans,
                       "predicted_tokens_per_length": config.eval_spans * config.eval_lengths[-1],
                       "loss_unit": "nats per byte"},
        "models": models,
        "rows": rows,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "seconds": time.perf_counter() - started,
    }
    write_results(results, Path(out))
    return results


def write_results(results: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
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
        axes.plot([r["length"] for r in ran], [r["loss"] for r in ran], marker="o", color=color,
                  label=f"{kind}: all positions")
        axes.plot([r["length"] for r in ran], [r["last_window_loss"] for r in ran], marker=".", linestyle=":",
                  color=color, label=f"{kind}: last {train_length} positions")
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
    header = f"{'model':<8} {'length':>6} {'x L':>4} {'loss':>8} {'bits/byte':>9} {'last-L loss':>11}"
    lines = [header, "-" * len(header)]
    for row in results["rows"]:
        if row["status"] == "ok":
            numbers = f"{row['loss']:>8.4f} {row['bits_per_byte']:>9.4f} {row['last_window_loss']:>11.4f}"
        else:
            numbers = f"{CANNOT_RUN:>8}"
        lines.append(f"{row['model']:<8} {row['length']:>6} {row['multiple']:>4} {numbers}")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    defaults = ExtrapolationConfig()
    parser = argparse.ArgumentParser(prog="python -m training.alibi_extrapolation",
                                     description=__doc__.split("\n\n")[0].split(": ", 1)[1])
    parser.add_argument("--steps", type=int, default=defaults.steps, help="training steps per model")
    parser.add_argument("--train-length", type=int, default=defaults.train_length,
                        help="training window L in bytes; evaluation at L, 2L, 4L, 8L")
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size)
    parser.add_argument("--n-layer", type=int, default=defaults.n_layer)
    parser.add_argument("--n-head", type=int, default=defaults.n_head)
    parser.add_argument("--n-embd", type=int, default=defaults.n_embd)
    parser.add_argument("--lr", type=float, default=defaults.lr, help="peak learning rate")
    parser.add_argument("--eval-spans", type=int, default=defaults.eval_spans,
                        help="validation spans of 8L+1 bytes (each length predicts the same tokens)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--out", type=Path, default=Path("runs/alibi_extrapolation"))
    parser.add_argument("--no-progress", action="store_true", help="no progress bars (for logs)")
    return parser


def main(argv: list[str] | None = None) -> dict:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = ExtrapolationConfig(
            train_length=args.train_length, steps=args.steps, batch_size=args.batch_size, n_layer=args.n_layer,
            n_head=args.n_head, n_embd=args.n_embd, lr=args.lr, eval_spans=args.eval_spans, seed=args.seed,
            device=args.device)
    except ValueError as error:
        parser.error(str(error))  # exits with status 2 and the usage line, like argparse's own errors
    results = run_experiment(config, args.out, progress=not args.no_progress)
    corpus = results["corpus"]
    print(f"corpus: {corpus['root']}: {corpus['train_files']} training files ({corpus['train_bytes']:,} bytes), "
          f"{corpus['validation_files']} validation files ({corpus['validation_bytes']:,} bytes)")
    for kind, model in results["models"].items():
        print(f"{kind}: {model['parameters']:,} parameters, {model['seconds']:.0f} s training, "
              f"train loss {model['first_loss']:.3f} -> {model['final_loss']:.3f}")
    print(f"validation: {results['evaluation']['predicted_tokens_per_length']:,} predicted bytes at every length")
    print(format_table(results))
    print(f"total {results['seconds']:.0f} s; wrote {', '.join(str(args.out / name) for name in RESULT_FILES)}")
    return results


if __name__ == "__main__":
    main()
