"""Runnable benchmarks: ``python -m benchmarks.kernels`` (and, as they land, .surgery, .dataloader)."""
