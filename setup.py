from setuptools import Extension, find_packages, setup

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

setup(
    name="fastcore_ops",
    version="0.1.0",
    description="Cheaper neural-network training: Triton kernels, model surgery, GPU data loading and efficient recipes",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="MIT",
    license_files=["LICENSE"],
    classifiers=[
        "License :: OSI Approved :: MIT License",
        "Programming Language :: Python :: 3",
        "Operating System :: POSIX :: Linux",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
    python_requires=">=3.10",
    # The library only: training/, benchmarks/ and tools/ run from the repository (python -m training.train
    # from its root), so a wheel puts no generic name such as `training` beside a user's own packages.
    packages=find_packages(include=["fastcore_ops*"]),
    # The kernels' table of tuned configs, read at import (fastcore_ops/kernels/backend.py).
    package_data={"fastcore_ops.kernels": ["tuned_configs.json"]},
    ext_modules=[JPEG_REGION],
    install_requires=[
        # A range, not a pin, so that installing the library keeps the user's PyTorch. The floor:
        # the kernels are torch.library.custom_op ops (register_fake, register_autograd: 2.4) in
        # modules with `from __future__ import annotations`, whose string annotations custom_op
        # reads from 2.5 on; torch.amp.GradScaler(device) and torch.compiler.is_compiling need 2.3.
        # The ceiling: a major release may change those APIs. Tested with 2.14.1 (the Makefile pins it).
        "torch>=2.5,<3",
        "torchvision>=0.20,<1",  # the release paired with torch 2.5: models.get_model, ops.stochastic_depth
        "triton>=3.0; platform_system == 'Linux'",  # optional elsewhere: the kernels then run their references
        "numpy",
        # libjpeg-turbo's strict decode: the data pipeline's check for JPEGs cut inside their scan.
        "simplejpeg>=1.9",
        "tqdm",
        "matplotlib",
        "safetensors>=0.4",  # python -m training.export's weights file (safetensors.torch.save_file, load_file)
    ],
    extras_require={
        # NVIDIA DALI decodes JPEGs on the GPU; its wheels are built per CUDA major version.
        "dali-cuda12": ["nvidia-dali-cuda120"],
        "dali-cuda13": ["nvidia-dali-cuda130"],
        # What the Makefile installs: DALI for the CUDA 13 build of torch 2.14.1 it pins.
        "data": ["nvidia-dali-cuda130"],
        "gpt": ["transformers>=4.48"],  # AttentionInterface, for the alibi surgery on GPT-2
        "text": ["tokenizers>=0.15"],  # the byte-level BPE tokenizer of language-model training
        "optim": ["timm>=1.0"],  # LAMB and LARS (training.optim)
        "tensorboard": ["tensorboard>=2.15"],  # python -m training.train --tensorboard
        # webdataset: the tests read our prepared shards with it, as other tools would.
        "dev": ["pytest>=8", "hypothesis>=6", "pytest-timeout", "webdataset"],
    },
)
