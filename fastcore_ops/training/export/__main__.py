"""Entry point of ``python -m fastcore_ops.training.export`` (see :mod:`fastcore_ops.training.export.cli`)."""

import sys

from fastcore_ops.training.export.cli import main

sys.exit(main())
