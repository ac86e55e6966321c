"""Entry point of ``python -m training.export`` (see :mod:`training.export.cli`)."""

import sys

from training.export.cli import main

sys.exit(main())
