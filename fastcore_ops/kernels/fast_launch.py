"""Launch an autotuned kernel, at a key its autotuner has met, without the autotuner's Python.

Triton's ``Autotuner.run`` rebuilds, at every launch, a dict of every argument, a filtered copy of it, the
key and the dtype names, before it finds the key's config in its cache: 3 to 13 µs a launch of our kernels on
a 2-core Zen 4 EPYC, beside the 15 to 21 µs of ``JITFunction.run`` and the launcher (Triton's launch path run
on the CPU up to the driver: ``python -m benchmarks.kernels.host_side``, reports/kernels-host-side-20261206).
On a GPU's host that is what eager launches of small inputs wait on. :class:`KnownKeyLaunch` wraps an
autotuner: at a key in its cache it launches the JIT function with the cached config directly, as
``Autotuner.run`` would after its lookup; at a new key (a retune empties the cache first) it hands the call to
``Autotuner.run``, which chooses. Triton's own code is used unchanged, so the kernel, its config and its
arguments are the same either way.

    >>> import triton
    >>> tuner = KnownKeyLaunch(triton.autotune([triton.Config({})], key=[])(triton.jit(lambda: None)))
    >>> tuner.configs == tuner.autotuner.configs  # everything else is the autotuner's
    True
    >>> import copy
    >>> copy.copy(tuner).configs == tuner.configs  # a copy's too, found before its attributes are
    True
"""

from __future__ import annotations

import functools


class KnownKeyLaunch:
    """``autotuner``'s launches (``tuner[grid](*args, **kwargs)``), which skip its Python at a known key.

    Anything else (``configs``, ``cache``, ``fn``, ...) is the autotuner's. Its configs may have no pre-hook
    (which ``Autotuner.run`` calls before every launch)."""

    def __init__(self, autotuner):
        if any(config.pre_hook is not None for config in autotuner.configs):
            raise ValueError(f"{autotuner.fn}: a config with a pre_hook needs Autotuner.run at every launch")
        self.autotuner = autotuner
        self._key_positions = [(name, autotuner.arg_names.index(name)) for name in autotuner.keys]
        self._arg_names = frozenset(autotuner.arg_names)
        self._config_kwargs: dict[int, dict] = {}  # id(config) -> config.all_kwargs(), made once

    def __getattr__(self, name: str):
        if name == "autotuner":  # not set yet (a copy made without __init__): not the autotuner's own attribute
            raise AttributeError(name)
        return getattr(self.autotuner, name)

    def __getitem__(self, grid):
        return functools.partial(self.run, grid=grid, warmup=False)

    def run(self, *args, **kwargs):
        config = self.known_config(args, kwargs)
        if config is None:
            return self.autotuner.run(*args, **kwargs)
        self.autotuner.best_config = config
        launch_kwargs = self._config_kwargs.get(id(config))
        if launch_kwargs is None:
            launch_kwargs = self._config_kwargs[id(config)] = config.all_kwargs()
        return self.autotuner.fn.run(*args, **kwargs, **launch_kwargs)

    def known_config(self, args: tuple, kwargs: dict):
        """The config ``Autotuner.run`` would launch these arguments with without choosing anew, else None.

        Its key, made as Triton 3.6 and 3.8 make it: the values of the key arguments, then the dtype name of
        every argument that has a dtype, positional ones first, then keyword ones, in the order given."""
        configs = self.autotuner.configs
        if len(configs) == 1:
            return configs[0]
        key = [kwargs[name] if name in kwargs else args[position] for name, position in self._key_positions
               if name in kwargs or position < len(args)]
        key += [str(value.dtype) for value in args if hasattr(value, "dtype")]
        key += [str(value.dtype) for name, value in kwargs.items() if name in self._arg_names and hasattr(value, "dtype")]
        return self.autotuner.cache.get(tuple(key))
