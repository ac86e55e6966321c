#!/usr/bin/env bash
# The GPU check run as a lent GPU machine runs it, proven on a CPU: a fresh virtual environment
# with that machine's torch 2.11 and torchvision 0.26 (and Triton, numpy, Pillow, matplotlib,
# tqdm, transformers), nothing of this project installed, no DALI, and the committed tree only
# (a git archive of HEAD holds no built C extension). The check runs in its small mode here.
#
#   tools/gpu_environment_check.sh [VENV] OUT
#
# VENV (default /tmp/fastcore-ops-gpu-env) is made or reused; OUT, a new or empty folder, gets
# gpu_check.md, gpu_check.json and kernels.png. PyTorch's own CPU index may be unreachable from
# here: pip then takes the PyPI wheels (CUDA builds, several GB), which run on the CPU alike.
set -euo pipefail
if [ $# -eq 1 ]; then venv=/tmp/fastcore-ops-gpu-env; out=$1; elif [ $# -eq 2 ]; then venv=$1; out=$2; else
    echo "error: usage: tools/gpu_environment_check.sh [VENV] OUT" >&2; exit 2
fi
out=$(realpath -m "$out")
root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
test -x "$venv/bin/python" || python3 -m venv "$venv"
# numpy<2.4: Triton 3.6's interpreter (the small mode's) fails with NumPy 2.4 (triton-lang/triton#9171;
# fastcore_ops says so when it meets the pair). The GPU machine compiles the kernels instead.
"$venv/bin/python" -m pip install --quiet "torch==2.11.*" "torchvision==0.26.*" triton "numpy<2.4" pillow \
    matplotlib tqdm transformers
if "$venv/bin/python" -c "import nvidia.dali" 2>/dev/null; then
    echo "error: DALI is installed in $venv, and the GPU machine has none; use a new VENV" >&2; exit 2
fi
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
git -C "$root" archive HEAD | tar -x -C "$tree"
"$venv/bin/python" -c "import torch, torchvision; print(f'torch {torch.__version__}, torchvision {torchvision.__version__}')"
cd "$tree" && PYTHONPATH=. "$venv/bin/python" -m benchmarks.gpu_check --out "$out"
