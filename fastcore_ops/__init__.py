"""fastcore_ops: cheaper neural-network training by changing how models are trained."""

from . import kernels
from .surgery import apply_surgery, list_surgeries

__all__ = ["apply_surgery", "kernels", "list_surgeries"]
__version__ = "0.1.0"
