"""Triton's interpreter, without the work it repeats on every call of a ``@triton.jit`` helper.

A kernel launch under the interpreter points ``triton.language``'s builtins at their interpreted versions, and
puts them back when the launch ends. Each call of a helper inside the kernel patches them again (Triton 3.8's
``InterpretedFunction.__call__``): a scan of every member of ``triton.language``, its ``tensor`` and ``math``,
that finds them patched already and changes nothing. With the BlurPool kernels' helpers called thousands of
times a launch, those scans were a third of the kernel tests' time (by cProfile). Here a launch patches once
per set of language modules its functions see, and the helpers' repeats are skipped; anything this does not
recognise (another Triton) is left as it is. :mod:`fastcore_ops.kernels.backend` installs it when it interprets.
"""

from __future__ import annotations

import functools
import inspect


def skip_repeated_language_patches() -> bool:
    """Install the skip into Triton's interpreter; whether it was installed (False: not this Triton's layout)."""
    try:
        import triton.language as tl
        from triton.runtime import interpreter
        launch, patch, scope = interpreter.GridExecutor.__call__, interpreter._patch_lang, interpreter._LangPatchScope
    except (ImportError, AttributeError):
        return False
    if getattr(patch, "skips_repeats", False):
        return True
    launches: list[set[frozenset[int]]] = []  # per launch in progress, the language modules patched in it

    def languages(fn) -> frozenset[int]:
        return frozenset(id(value) for value in fn.__globals__.values() if inspect.ismodule(value)
                         and value in (tl, tl.core))

    @functools.wraps(patch)
    def patch_once(fn):
        if launches:
            seen = languages(fn)
            if seen in launches[-1]:
                return scope()  # patched by this launch already: nothing to restore
            launches[-1].add(seen)
        return patch(fn)

    @functools.wraps(launch)
    def tracked_launch(self, *args, **kwargs):
        launches.append(set())
        try:
            return launch(self, *args, **kwargs)
        finally:
            launches.pop()

    patch_once.skips_repeats = True
    interpreter._patch_lang = patch_once
    interpreter.GridExecutor.__call__ = tracked_launch
    return True
