"""``python -m fastcore_ops.training.export``: a training run's weights as a plain state dict, to load anywhere.

    python -m fastcore_ops.training.export runs/mild --out exports/mild                   # model.safetensors
    python -m fastcore_ops.training.export runs/mild --out exports/mild-pt --format pt    # model.pt

Writes into ``--out`` the weights the run evaluated, from its newest checkpoint: EMA's or SWA's average where it
used one, else the model's. ``model.safetensors`` is read by ``safetensors.torch.load_file``, ``model.pt`` by
``torch.load(path, weights_only=True)``; beside them ``config.json`` (the run's configuration) and ``model.json``
(the task, the model, its num_classes or vocab_size, the step, the final metrics if the run finished).
``fastcore_ops.training.export.load_model(DIR)`` rebuilds the model from them, surgeries included. ``--out`` must be new,
empty, or an earlier export (it holds ``.fastcore_ops-export``); a refused command (exit 2, one ``error:`` line)
leaves it as it was, and a failure while writing leaves nothing half-written.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from fastcore_ops import cli
from fastcore_ops.owned_folder import check_claimable
from fastcore_ops.training.plugins import add_import_option, import_modules


def build_parser() -> cli.ArgumentParser:
    """The command line of ``python -m fastcore_ops.training.export``."""
    parser = cli.ArgumentParser(prog="python -m fastcore_ops.training.export", description=cli.description(__doc__))
    parser.add_argument("run", type=Path, metavar="RUN_FOLDER",
                        help="the folder of a run python -m fastcore_ops.training.train wrote (its --out)")
    parser.add_argument("--out", type=Path, required=True,
                        help="the folder to write the export into: new, empty, or an earlier export")
    parser.add_argument("--format", default="safetensors",
                        help="the weights' file: safetensors (model.safetensors), or pt (model.pt, for "
                             "torch.load(weights_only=True))")
    add_import_option(parser)
    return parser


@cli.command(build_parser)
def main(args: argparse.Namespace) -> int | None:
    from fastcore_ops.training.checkpoint import CheckpointError  # torch and the trainer's parts: once parsed
    from fastcore_ops.training.export.folder import FORMATS, TOOL, write_export
    from fastcore_ops.training.export.from_run import read_run

    try:
        cli.check_name("--format", args.format, FORMATS, "format")
        import_modules(args.imports)
        check_claimable(args.out, TOOL)
        export = read_run(args.run, args.format)
        write_export(args.out, export.weights, export.config, export.info)
    except (*cli.REFUSALS, CheckpointError) as error:  # a damaged checkpoint is bad input too
        return cli.refuse(error)
    info = export.info
    print(f"{args.out}: {FORMATS[args.format].file_name} (the {info['weights_from']} weights at step {info['step']}), "
          f"config.json, model.json; load it with fastcore_ops.training.export.load_model")
