"""What pyproject.toml cannot declare: the optional C extension. The rest of the metadata is there."""

from setuptools import Extension, setup

# The pil backend's region decoder (fastcore_ops/data/backends/workers/_jpeg_region.c), against the system's
# libjpeg-turbo (Debian: libjpeg62-turbo-dev, which Pillow-SIMD's build needs too). Optional: without
# a compiler or the headers the install goes on, and the backend decodes whole images instead.
JPEG_REGION = Extension(
    "fastcore_ops.data.backends.workers._jpeg_region",
    ["fastcore_ops/data/backends/workers/_jpeg_region.c"],
    libraries=["jpeg"],
    extra_compile_args=["-O2", "-std=c99"],
    optional=True,
)

setup(ext_modules=[JPEG_REGION])
