"""The GPU check: one command that checks and times everything GPU-specific (``python -m benchmarks.gpu_check``).

``parts.py`` lists the parts and their time budgets; each part is a module of its own here.
"""
