"""One training run of an image-classification recipe through Composer's Trainer, for ``benchmarks.peers``.

The job is the recipe's as ``python -m fastcore_ops.training.train`` runs it, handed to Composer 0.32.1
(MosaicML) the way its users write it: the same ResNet, initial weights and patch-whitened
stem, the same SGD and cosine-with-warmup schedule, the same number of steps; the recipe's
surgeries and methods as Composer's own algorithms (BlurPool, ChannelsLast, LabelSmoothing,
ProgressiveResizing on the batch) and its BCE or soft cross-entropy loss. The training images
come through the loader Composer's users write (``--loader torchvision``, the default:
ImageFolder, the recipe's crop and flip per image, a DataLoader with a worker per core), or
through ours at the full size (``--loader ours``), which leaves the trainers alone to compare.

Composer pins an older torch, so it lives in a folder of its own (``make peers``), appended to
``sys.path`` after this environment's packages. Its ``amp_bf16`` precision autocasts only on
CUDA and XLA devices; on a CPU the model's forward is wrapped in ``torch.autocast`` here, as
our trainer does, so that both compute in the precision ``fastcore_ops.training.precision`` chooses.

Writes ``summary.json`` in ``--out``: ``train_seconds`` (patch whitening plus ``fit()``, no
evaluation), ``steps`` and ``metrics`` (top-1 and loss on the evaluation images).

    python -m benchmarks.composer_job --recipe cifar_mild --data ../shared/datasets/cifar10-jpeg \\
        --peers .peers --out runs/composer-0
"""

from __future__ import annotations

import sys

from fastcore_ops import cli

from .job_cli import LOADERS, installed_in, job_command, job_parser


def build_parser() -> cli.ArgumentParser:
    """The command line of ``python -m benchmarks.composer_job``."""
    parser = job_parser("python -m benchmarks.composer_job", cli.description(__doc__))
    parser.add_argument("--peers", type=installed_in("composer"), required=True,
                        help="the folder Composer is installed in (make peers)")
    parser.add_argument("--loader", choices=LOADERS, default="torchvision",
                        help="the training images through torchvision's DataLoader or through ours")
    return parser


main = job_command(build_parser, "benchmarks.composer_run")


if __name__ == "__main__":
    sys.exit(main())
