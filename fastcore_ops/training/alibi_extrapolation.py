"""``python -m fastcore_ops.training.alibi_extrapolation``: ALiBi, train short and test long.

Trains the project's small GPT twice on the trainer of ``python -m fastcore_ops.training.train``, on the
bytes of a text corpus (by default the standard library's source, :mod:`fastcore_ops.training.text.corpus`)
at a short length L: once with learned position embeddings, once made ALiBi by the ``alibi``
surgery. Both start from the very same weights (the ALiBi one lacks only the position table)
and see the very same batches. Then both are evaluated on all the validation tokens at lengths
L, 2L, 4L and 8L (every length predicts the same tokens); the learned model cannot run beyond
its table of L positions, which is reported as "cannot run".

    python -m fastcore_ops.training.alibi_extrapolation --out runs/alibi      # defaults: L=128, about 10 CPU minutes
    python -m fastcore_ops.training.alibi_extrapolation --steps 50 --train-length 64 --out runs/alibi_quick

Writes ``results.json``, ``results.csv`` and ``extrapolation.png`` to ``--out`` (and each model's
run folder, ``learned/`` and ``alibi/``) and prints a table. On the CPU, leave
FASTCORE_OPS_INTERPRET at 0 (its default) so ALiBi attention runs its PyTorch reference rather
than Triton's interpreter; on a CPU shared with other jobs, also set OMP_WAIT_POLICY=PASSIVE:
spinning OpenMP threads then made training about 4x slower here.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from fastcore_ops import cli
from fastcore_ops.owned_folder import check_claimable

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
        from fastcore_ops.checks import check_int, check_number  # torch: once a configuration is made

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
        cli.check_device(self.device)
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd must be divisible by n_head, got n_embd={self.n_embd}, n_head={self.n_head}")


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
    defaults = ExtrapolationConfig  # its fields' defaults, read without making (and checking) a configuration
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
    parser.add_argument("--out", type=Path, required=True,
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
        from fastcore_ops.training.alibi_experiment import run_experiment  # torch and the trainer: once parsed

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
