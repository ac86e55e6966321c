"""matplotlib's pyplot, drawing to files only: the Agg backend, since the commands run on servers and in CI.

The one place that picks the backend; every module that draws imports ``plt`` from here.

    >>> from training.figures import plt
    >>> plt.get_backend().lower()
    'agg'
"""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

__all__ = ["plt"]
