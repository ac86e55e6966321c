"""Replace Pillow with Pillow-SIMD in this Python environment, built from source for this CPU.

Run after every install of the project: pip puts plain Pillow back whenever it reinstalls
torchvision's requirements, and both distributions own the same ``PIL`` package. Idempotent and
quick when Pillow-SIMD is already the imported PIL; the built wheel is kept in
``<venv>/pillow-simd/<cpu flags>/`` so putting it back needs no rebuild. When the build fails
(no compiler, no libjpeg/zlib headers), plain Pillow stays and a warning says so; the project
works either way, the pil backend just decodes more slowly.

    python tools/install_pillow_simd.py
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# Everything that imports PIL in the project must still import once the swap is done.
_IMPORT_CHECK = "import PIL.Image, torchvision, matplotlib"
_IN_USE = (
    "import importlib.metadata as m, PIL\n"
    "try:\n    simd = m.version('pillow-simd')\nexcept m.PackageNotFoundError:\n    simd = None\n"
    "raise SystemExit(0 if PIL.__version__ == simd else 1)"
)


# Optional codecs that plain Pillow's wheels bundle but a source build only gets from system headers.
# codec: (the package with its headers, what the pil backend skips without it)
_CODECS = {"webp": ("libwebp-dev", "WebP images"), "libtiff": ("libtiff-dev", "compressed TIFFs")}
_MISSING_CODECS = "from PIL import features; print(' '.join(c for c in {codecs!r} if not features.check(c)))"


def _run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, env=env)


def _pip(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return _run(sys.executable, "-m", "pip", *args, "--quiet", "--disable-pip-version-check", env=env)


def _warn(message: str) -> None:
    print(f"\n*** WARNING: {message} ***\n", file=sys.stderr)


def _has_avx2() -> bool:
    try:
        return any(line.startswith("flags") and " avx2" in line for line in Path("/proc/cpuinfo").read_text().splitlines())
    except OSError:
        return False


def _build_wheel(folder: Path, avx2: bool) -> Path | None:
    """The Pillow-SIMD wheel in ``folder``, built first if it is not there; None if the build fails."""
    wheels = sorted(folder.glob("pillow_simd-*.whl"))
    if wheels:
        return wheels[-1]
    folder.mkdir(parents=True, exist_ok=True)
    # Pillow-SIMD picks its SIMD code paths at compile time from the compiler flags.
    env = {**os.environ, "CC": "cc -mavx2" if avx2 else "cc"}
    print(f"building Pillow-SIMD from source ({'AVX2' if avx2 else 'SSE4'}); this takes a minute or two", file=sys.stderr)
    build = _pip("wheel", "--no-deps", "--no-binary", ":all:", "--no-cache-dir", "-w", str(folder), "pillow-simd", env=env)
    wheels = sorted(folder.glob("pillow_simd-*.whl"))
    if build.returncode != 0 or not wheels:
        _warn("Pillow-SIMD could not be built, keeping plain Pillow (the pil backend decodes more slowly). "
              f"Build output ends with:\n{build.stdout[-1500:]}{build.stderr[-1500:]}")
        return None
    return wheels[-1]


def main() -> int:
    if _run(sys.executable, "-c", _IN_USE).returncode == 0:
        return 0  # already Pillow-SIMD: nothing to do
    avx2 = _has_avx2()
    wheel = _build_wheel(Path(sys.prefix) / "pillow-simd" / ("avx2" if avx2 else "sse4"), avx2)
    if wheel is None:
        return 0
    # Plain Pillow's uninstall deletes the PIL files both distributions share, hence the
    # forced reinstall of Pillow-SIMD afterwards.
    _pip("uninstall", "--yes", "pillow")
    swap = _pip("install", "--no-deps", "--force-reinstall", str(wheel))
    check = _run(sys.executable, "-c", _IMPORT_CHECK + "\n" + _IN_USE)
    if swap.returncode == 0 and check.returncode == 0:
        print(f"Pillow-SIMD installed from {wheel.name}", file=sys.stderr)
        missing = _run(sys.executable, "-c", _MISSING_CODECS.format(codecs=list(_CODECS))).stdout.split()
        if missing:
            skipped = " and ".join(_CODECS[c][1] for c in missing)
            packages = " ".join(_CODECS[c][0] for c in missing)
            _warn(f"Pillow-SIMD was built without {', '.join(missing)}: the pil backend will skip {skipped}. "
                  f"Install {packages}, delete {wheel.parent} and run this script again.")
        return 0
    _warn(f"Pillow-SIMD did not work here, going back to plain Pillow: {swap.stderr[-800:]}{check.stderr[-800:]}")
    _pip("uninstall", "--yes", "pillow-simd")
    restore = _pip("install", "--force-reinstall", "--no-deps", "pillow")
    if restore.returncode != 0:
        print(f"could not reinstall Pillow: {restore.stderr}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
