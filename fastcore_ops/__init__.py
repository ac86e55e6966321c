"""fastcore_ops: cheaper neural-network training by changing how models are trained."""

from . import kernels

__version__ = "0.1.0"
