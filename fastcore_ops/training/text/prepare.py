"""``python -m fastcore_ops.training.text.prepare``: tokenize a corpus once into memory-mappable files, nanoGPT-style.

    python -m fastcore_ops.training.text.prepare runs/tokens/stdlib-bytes                  # the standard library, bytes
    python -m fastcore_ops.training.text.prepare my_texts/ runs/tokens/mine --tokenizer bpe --vocab-size 4096

What a prepared folder holds, and how it is checked and written: :mod:`fastcore_ops.training.text.tokens`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from fastcore_ops import cli


def build_parser() -> cli.ArgumentParser:
    """The command line of ``python -m fastcore_ops.training.text.prepare``."""
    parser = cli.ArgumentParser(prog="python -m fastcore_ops.training.text.prepare", description=cli.description(__doc__))
    parser.add_argument("source", nargs="?", type=Path, default=None,
                        help="folder of text files (default: the Python standard library's source)")
    parser.add_argument("destination", type=Path,
                        help="folder to write the prepared tokens to: new, empty, or prepared here before")
    parser.add_argument("--tokenizer", default="bytes",
                        help="bytes: one token per byte; bpe: byte-level BPE trained on the training files")
    parser.add_argument("--vocab-size", type=int, default=None, help="bpe's vocabulary size (default: 4096)")
    parser.add_argument("--validation-every", type=int, default=10, metavar="K", help="every K-th file is validation")
    cli.add_no_progress_option(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m fastcore_ops.training.text.prepare``: 0 once prepared; 2 when refused, with one ``error:`` line on
    stderr and the destination as it was (progress bars only on a terminal)."""
    try:
        options = build_parser().parse_args(argv)
        from fastcore_ops.training.text.tokenizers import TOKENIZER_KINDS  # numpy: once the command line parsed
        from fastcore_ops.training.text.tokens import SPLITS, load_prepared, prepare, token_cache

        cli.check_name("--tokenizer", options.tokenizer, TOKENIZER_KINDS, "tokenizer")
        token_cache()  # not written here, but checked by every text command (see its docstring)
        folder = prepare(options.source, options.destination, tokenizer=options.tokenizer,
                         vocab_size=options.vocab_size, validation_every=options.validation_every,
                         progress=not options.no_progress and sys.stderr.isatty())
        meta = load_prepared(folder).meta
    except (ValueError, TypeError) as error:
        return cli.refuse(error)
    except OSError as error:  # the disk or the permissions, not the arguments
        return cli.refuse(f"{error}; check that the source is readable and the destination's folder writable, with "
                       f"free space, then run again")
    print(f"{folder}: {meta['tokenizer']} tokenizer, {meta['vocab_size']} tokens ({meta['dtype']})")
    for split in SPLITS:
        counts = meta[split]
        print(f"  {split:<10} {counts['tokens']:>12,} tokens {counts['bytes']:>12,} bytes {len(counts['files']):>6} "
              f"files ({counts['bytes'] / counts['tokens']:.2f} bytes per token)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
