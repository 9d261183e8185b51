# The two set-up commands: `make demo` runs the main job, `make test` runs the tests.
# Each creates .venv if missing and installs what it needs (tools/setup_env.sh).
VENV ?= .venv
PYTHON := $(VENV)/bin/python
export HF_HUB_OFFLINE := 1

.PHONY: setup demo test test-fast test-min gpu-check

setup:
	@bash tools/setup_env.sh $(VENV)

demo: setup
	$(PYTHON) tools/demo.py

test: setup
	$(PYTHON) -m pytest -n auto

test-fast: setup
	$(PYTHON) -m pytest -n auto -m "not slow"

# The fast tests at the oldest versions vispe declares (pyproject.toml): a separate environment, .venv-min, built
# with the exact floors of tests/floors.txt.
test-min:
	@bash tools/setup_env.sh .venv-min tests/floors.txt
	.venv-min/bin/python -m pytest -n auto -m "not slow"

# vispe on a CUDA device: the CUDA suite (tests/cuda), the benchmark rows written to benchmarks/cuda_* and the
# Gaussian codec's rendered quality with gsplat ([render]); it refuses to run without CUDA (tools/gpu_check.py).
gpu-check: setup
	$(PYTHON) -m pip install --quiet -e '.[render]' || echo "gsplat did not install: its checks will fail and say so"
	$(PYTHON) tools/gpu_check.py
