"""Entry point of ``python -m training.ablate`` (see :mod:`training.ablate.cli`)."""

import sys

from training.ablate.cli import main

sys.exit(main())
