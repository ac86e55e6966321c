"""One run of ``python -m fastcore_ops.training.train`` with the pil backend's decoding workers at a chosen niceness.

    PYTHONPATH=. python reports/worker-niceness-20261127/measure.py NICENESS TRAIN-ARGUMENTS...

NICENESS replaces ``pil_backend.CPU_WORKER_NICENESS``, the default a CPU run's loaders read
(0 is what every run did before 2026-11-27). ``measure.sh`` runs the comparison.
"""

import sys

from fastcore_ops.data.backends import pil as pil_backend
from fastcore_ops.training import train


def main(argv: list[str]) -> int:
    niceness = argv[0] if argv else ""
    if not (niceness.isascii() and niceness.isdigit()) or int(niceness) > 19:
        print(f"error: NICENESS must be an integer from 0 to 19 (got {niceness!r}); "
              "usage: measure.py NICENESS TRAIN-ARGUMENTS...", file=sys.stderr)
        return 2
    pil_backend.CPU_WORKER_NICENESS = int(niceness)
    return train.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
