"""Entry point of ``python -m fastcore_ops.training.ablate`` (see :mod:`fastcore_ops.training.ablate.cli`)."""

import sys

from fastcore_ops.training.ablate.cli import main

sys.exit(main())
