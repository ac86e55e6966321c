"""``python -m benchmarks.gpu_check.part MODULE JSON [--small]``: one part of the GPU check, in a process of its own.

The check starts it; it runs ``MODULE.run(mode, recorder)``, the recorder writing to JSON as it
goes. An exception is written there too, with its traceback, and the exit code is 1.
"""

from __future__ import annotations

import importlib
import json
import sys
import traceback
from pathlib import Path

import fastcore_ops.kernels  # noqa: F401  (first: it settles Triton's interpreter mode before anything imports triton)
from benchmarks.gpu_check.parts import Mode, Recorder


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    module, path, small = argv[0], Path(argv[1]), "--small" in argv[2:]
    record = Recorder(path)
    record.save()  # an empty result at once: a part killed before its first row still has a file
    try:
        importlib.import_module(module).run(Mode(small=small), record)
    except Exception as error:  # any failure of the part is its result; the check goes on with the next
        saved = json.loads(path.read_text())
        saved["error"] = f"{type(error).__name__}: {error}"
        saved["traceback"] = traceback.format_exc()
        path.write_text(json.dumps(saved, indent=1) + "\n")
        print(saved["traceback"], file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
