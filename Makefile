# Two entry points for a fresh machine: `make demo` (the main job) and `make test`.
# Each creates .venv/ on first use and reinstalls only when pyproject.toml, setup.py or the C extension changes.

VENV := .venv
PYTHON := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed
TEST_INSTALLED := $(VENV)/.installed-test

# DALI decodes on the GPU: installed for training only where nvidia-smi finds one (on a CPU the pil backend
# serves, and the venv is about 0.6 GB smaller). The tests install it anyway, to check its CPU pipelines.
HAS_GPU := $(shell nvidia-smi -L >/dev/null 2>&1 && echo yes)
comma := ,
EXTRAS := gpt,text,optim,tensorboard$(if $(HAS_GPU),$(comma)data)

.PHONY: demo data test test-lent-stack peers gpu-check clean FORCE

$(INSTALLED): pyproject.toml setup.py fastcore_ops/data/backends/workers/_jpeg_region.c
	test -x $(PYTHON) || python3 -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --upgrade pip
	# The exact releases this project is tested with; pyproject.toml itself accepts a range.
	$(PYTHON) -m pip install --quiet torch==2.14.1 torchvision==0.29.1
	$(PYTHON) -m pip install --quiet -e ".[$(EXTRAS)]"
	# After every project install: pip may have put plain Pillow back (see the script).
	$(PYTHON) tools/install_pillow_simd.py
	touch $@

$(TEST_INSTALLED): $(INSTALLED)
	$(PYTHON) -m pip install --quiet -e ".[dev,data,$(EXTRAS)]"
	$(PYTHON) tools/install_pillow_simd.py
	touch $@

# A built JPEG region decoder that went missing (deleted, or a checkout beside an older .venv) installs again,
# which builds it; without libjpeg's headers the install still ends, and the loader warns that it is missing.
ifeq ($(wildcard fastcore_ops/data/backends/workers/_jpeg_region*.so),)
$(INSTALLED): FORCE
endif
FORCE:

# The peers of python -m benchmarks.peers, Composer and airbench: their own folder, without their dependencies
# (Composer pins an older torch; airbench needs only torch and torchvision).
PEERS := .peers/.installed
$(PEERS): benchmarks/peers-requirements.txt $(INSTALLED)
	rm -rf .peers
	$(PYTHON) -m pip install --quiet --no-deps --target .peers -r benchmarks/peers-requirements.txt
	touch $@
peers: $(PEERS)

# CIFAR-10 as the JPEG ImageFolder the recipes read, into data/cifar10-jpeg: downloaded (163 MB), or from a copy
# of cifar-10-python.tar.gz you have (make data ARCHIVE=path/to/it).
data: $(INSTALLED)
	$(PYTHON) -m fastcore_ops.data.datasets cifar10 data/cifar10-jpeg $(if $(ARCHIVE),--archive $(ARCHIVE))

# The main job: the Mild recipe tuned for 500 CIFAR-10 images per class, on them (2.5 minutes on 2 CPU cores with
# AVX2 in fp32: reports/demo-avx2-20261202/).
# Each demo writes a new run folder, so nothing earlier is overwritten. Its data: what make data made, else the
# project machines' copy.
DATA ?= $(or $(wildcard data/cifar10-jpeg),../shared/datasets/cifar10-jpeg)
demo: $(INSTALLED)
	$(PYTHON) -m fastcore_ops.training.train --recipe cifar_mild_small --data $(DATA) --subset 500 --eval-every 2 \
		--out runs/demo/$$(date +%Y%m%d-%H%M%S)

# Every Triton kernel runs through Triton's interpreter on machines without a GPU, compiled where
# there is one (conftest.py decides; FASTCORE_OPS_INTERPRET=1 asks for the interpreter anyway). The
# slowest tests are listed at the end: the suite must stay under 20 minutes. One pytest-xdist worker a core, up
# to 2 (each computes on one thread: conftest.py), a test file to a worker, so that a module's shared fixture
# (the compile check, the fingerprint children) is made once: on 2 cores 1076 s against 1616 s in one process.
test: $(TEST_INSTALLED) $(PEERS)
	$(PYTHON) -m pytest -q --numprocesses=auto --maxprocesses=2 --dist=loadfile --durations=15

# The suite on the lent GPU machines' torch and Triton (torch 2.11, Triton 3.6: docs/benchmarks.md), in .venv-lent/
# (about 6 GB), before a lease that runs changed kernel code: what the pinned torch has and 2.11 lacks fails here,
# not in the lease's minutes. NumPy below 2.4, which Triton 3.6's interpreter needs (triton-lang/triton#9171); the
# recipe fingerprints left out, as they hold bit for bit on the pinned torch alone.
LENT_VENV := .venv-lent
LENT_STACK := torch==2.11.0 torchvision==0.26.0 "numpy<2.4" "setuptools>=77" wheel
$(LENT_VENV)/.installed: pyproject.toml setup.py fastcore_ops/data/backends/workers/_jpeg_region.c
	test -x $(LENT_VENV)/bin/python || python3 -m venv $(LENT_VENV)
	$(LENT_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(LENT_VENV)/bin/python -m pip install --quiet $(LENT_STACK) -e ".[dev,data,$(EXTRAS)]"
	$(LENT_VENV)/bin/python tools/install_pillow_simd.py
	touch $@
test-lent-stack: $(LENT_VENV)/.installed $(PEERS)
	$(LENT_VENV)/bin/python -m pytest -q --numprocesses=auto --maxprocesses=2 --dist=loadfile \
		--ignore=tests/training/test_recipe_fingerprints.py

# The lent machines' Python with their torch and Triton, for tools/lent_gpu.sh prepare --compile: Triton files a
# compiled kernel under its own build, which differs from one Python version to the next, so the kernels carried to
# a lease must be compiled by the lease's build (the kernels and their tests alone: no data extras, no Pillow-SIMD).
LENT_PYTHON ?= $(firstword $(shell python3.12 -c 'import sys; print(sys.executable)' 2> /dev/null) \
	$(wildcard $(HOME)/.pyenv/versions/3.12*/bin/python3.12))
.venv-lent-compile/.installed: pyproject.toml setup.py fastcore_ops/data/backends/workers/_jpeg_region.c
	@test -n "$(LENT_PYTHON)" || { echo "error: no python3.12 found; name one with LENT_PYTHON=PATH" >&2; exit 2; }
	test -x .venv-lent-compile/bin/python || $(LENT_PYTHON) -m venv .venv-lent-compile
	.venv-lent-compile/bin/python -m pip install --quiet --upgrade pip
	.venv-lent-compile/bin/python -m pip install --quiet $(LENT_STACK) -e ".[dev]"
	touch $@

# A GPU user's first command: checks and times everything GPU-specific (benchmarks/gpu_check) in at most
# a few minutes, with whatever Python holds torch and Triton (nothing is installed); without CUDA it
# runs its small mode. It writes gpu_check.md, .json and kernels.png into a new run folder.
gpu-check:
	PYTHONPATH=. $(or $(wildcard $(PYTHON)),python3) -m benchmarks.gpu_check --out runs/gpu-check/$$(date +%Y%m%d-%H%M%S)

clean:
	rm -rf $(VENV) $(LENT_VENV) .venv-lent-compile .peers *.egg-info .pytest_cache .hypothesis
