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
from pathlib import Path

from fastcore_ops import cli
from fastcore_ops.owned_folder import check_claimable
from fastcore_ops.training.extrapolation_config import RESULT_FILES, TOOL, ExtrapolationConfig, format_table


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
