"""Entry point of ``python -m training.tradeoff`` (see :mod:`training.tradeoff.cli`)."""

import sys

from training.tradeoff.cli import main

sys.exit(main())
