from setuptools import find_packages, setup

setup(
    name="fastcore_ops",
    version="0.1.0",
    description="Cheaper neural-network training: Triton kernels, model surgery, GPU data loading and efficient recipes",
    python_requires=">=3.10",
    packages=find_packages(include=["fastcore_ops*", "training*", "benchmarks*"]),
    install_requires=[
        # The releases these machines install from local disk (a CUDA build that brings triton).
        "torch==2.14.1",
        "torchvision==0.29.1",
        "triton>=3.0; platform_system == 'Linux'",
        "numpy",
        "tqdm",
        "matplotlib",
    ],
    extras_require={
        "data": ["kornia>=0.7", "nvidia-dali-cuda130"],
        "gpt": ["transformers>=4.48"],  # AttentionInterface, for the alibi surgery on GPT-2
        "dev": ["pytest>=8", "hypothesis>=6", "pytest-timeout"],
    },
)
