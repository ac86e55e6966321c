#!/usr/bin/env bash
# The GPU checks for a lent GPU machine (Python 3.12, torch and Triton installed, no network, no
# dataset, nothing of this project installed), prepared here and run there in one call.
#
#   tools/lent_gpu.sh prepare     # here: .gpu-carry/ with the wheels the suite needs beyond that
#                                 # machine's packages, and a subset of ../shared/datasets
#   tools/lent_gpu.sh run OUT     # there, from the repository root, with .gpu-carry carried:
#                                 # the GPU check, then `pytest -m gpu` in the time that is left
#
# `run` writes to OUT: gpu_check.md, gpu_check.json, kernels.png, gpu_check.log, profile.txt,
# pytest.log, junit.xml and machine.txt (at most 8 files, as the device tool brings back). It ends within
# RUN_SECONDS (default 585) of its start. ../shared/datasets is made from the carried subset only
# where it does not exist.
set -euo pipefail
carry=.gpu-carry
case "${1:-}" in
prepare)
    [ $# -eq 1 ] || { echo "error: usage: tools/lent_gpu.sh prepare" >&2; exit 2; }
    datasets=../shared/datasets
    [ -d "$datasets/cifar10-jpeg/train" ] && [ -d "$datasets/imagenet-sample" ] \
        || { echo "error: $datasets is missing; prepare runs beside the project's ../shared" >&2; exit 2; }
    grep -qx "/$carry/" "$(git rev-parse --git-dir)/info/exclude" 2>/dev/null \
        || echo "/$carry/" >> "$(git rev-parse --git-dir)/info/exclude"
    # Replace only a folder this script wrote (it leaves a marker), never one of the same name made otherwise.
    marker="$carry/.written-by-lent_gpu"
    if [ -e "$carry" ] && [ ! -f "$marker" ]; then
        echo "error: $carry exists and was not written by tools/lent_gpu.sh; move it away and run prepare again" >&2
        exit 2
    fi
    rm -rf "$carry" && mkdir -p "$carry/wheels" "$carry/datasets" && touch "$marker"
    # simplejpeg and webdataset: the suite imports them; that machine has neither.
    python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d "$carry/wheels" simplejpeg webdataset braceexpand
    # The suite's images, 40 CIFAR-10 images per class and split and 60 ImageNet photos (about 11 MB).
    cp "$datasets/README.md" "$carry/datasets/"
    for split in train test; do
        for folder in "$datasets/cifar10-jpeg/$split"/*/; do
            target="$carry/datasets/cifar10-jpeg/$split/$(basename "$folder")"
            mkdir -p "$target"
            mapfile -t images < <(find "$folder" -maxdepth 1 -type f | sort)
            cp -t "$target" "${images[@]:0:40}"
        done
    done
    mkdir -p "$carry/datasets/imagenet-sample"
    mapfile -t classes < <(find "$datasets/imagenet-sample" -mindepth 1 -maxdepth 1 -type d | sort)
    cp -r -t "$carry/datasets/imagenet-sample" "${classes[@]:0:60}"
    du -sh "$carry"
    ;;
run)
    [ $# -eq 2 ] || { echo "error: usage: tools/lent_gpu.sh run OUT" >&2; exit 2; }
    out=$2
    [ -d "$carry/wheels" ] || { echo "error: no $carry/wheels; run tools/lent_gpu.sh prepare here and carry $carry" >&2; exit 2; }
    mkdir -p "$out"
    export PYTHONUNBUFFERED=1
    { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || echo "no nvidia-smi"
      python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)"
      nproc; } > "$out/machine.txt" 2>&1
    check=$(mktemp -d)
    trap 'rm -rf "$check"' EXIT
    PYTHONPATH=. timeout 400 python3 -m benchmarks.gpu_check --out "$check/run" > "$out/gpu_check.log" 2>&1 \
        || echo "gpu_check exit $?" >> "$out/gpu_check.log"
    cp "$check"/run/gpu_check.{md,json} "$check"/run/kernels.png "$out"/ 2>/dev/null || true
    # Where the fused BCE's forward+backward spends its time, op by op (its backward was unexplained).
    PYTHONPATH=. timeout 60 python3 -m benchmarks.kernels --kernels bce_with_logits --profile --out "$check/profile" \
        >> "$out/gpu_check.log" 2>&1 || echo "profile exit $?" >> "$out/gpu_check.log"
    cp "$check/profile/profile.txt" "$out"/ 2>/dev/null || true
    python3 -m pip install --quiet --no-index --no-deps --no-compile --target "$check/site" "$carry"/wheels/*.whl \
        >> "$out/machine.txt" 2>&1 || echo "the carried wheels did not install: pip exit $?" >> "$out/machine.txt"
    if [ ! -e ../shared/datasets ]; then mkdir -p ../shared && cp -r "$carry/datasets" ../shared/; fi
    left=$(( ${RUN_SECONDS:-585} - SECONDS ))
    # Four test processes where pytest-xdist is installed: the tests' time there is mostly Triton compiling.
    workers=$(python3 -c "import xdist" 2>/dev/null && echo "-n 4" || true)
    echo "pytest -m gpu ${workers}: ${left} s left" >> "$out/machine.txt"
    PYTHONPATH=".:$check/site" timeout "$left" python3 -m pytest -m gpu $workers -q -p no:cacheprovider --durations=20 \
        --junitxml="$out/junit.xml" > "$out/pytest.log" 2>&1 || echo "pytest exit $? after ${SECONDS} s" >> "$out/pytest.log"
    tail -n 3 "$out/gpu_check.log" "$out/pytest.log"
    ;;
*)
    echo "error: usage: tools/lent_gpu.sh prepare | run OUT" >&2; exit 2
    ;;
esac
