"""fastcore_ops: cheaper neural-network training by changing how models are trained.

The kernels and the surgeries import torch and triton, so they load on first use: a command can
parse its command line, and answer --help, without them.

    >>> import fastcore_ops
    >>> [surgery["name"] for surgery in fastcore_ops.list_surgeries()][:2]
    ['alibi', 'blurpool']
"""

from fastcore_ops.lazy import lazy_exports

__all__, __getattr__ = lazy_exports(__name__, {"surgery": ["apply_surgery", "list_surgeries"]}, modules=("kernels",))
__version__ = "0.1.0"
