"""Entry point of ``python -m fastcore_ops.training.tradeoff`` (see :mod:`fastcore_ops.training.tradeoff.cli`)."""

import sys

from fastcore_ops.training.tradeoff.cli import main

sys.exit(main())
