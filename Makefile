# towerpack: `make test` and `make demo` set everything up in .venv first.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
# HOROVOD=0 skips building Horovod (its tests then skip outside CI).
HOROVOD ?= 1
WHEEL_CACHE ?= .cache/wheels
PYTEST_ARGS ?=
# TensorFlow flavour: tensorflow[and-cuda] where an NVIDIA GPU answers, tensorflow-cpu elsewhere.
TF_EXTRA ?= $(shell nvidia-smi -L >/dev/null 2>&1 && echo gpu || echo cpu)
PIP := $(PY) -m pip --disable-pip-version-check

.PHONY: setup system-deps test lint clean distclean demo bench

# The stamps name the TensorFlow flavour, so that switching TF_EXTRA reinstalls.
DEPS_STAMP := $(VENV)/.deps-$(TF_EXTRA)-stamp
OTHER_TF := $(if $(filter gpu,$(TF_EXTRA)),tensorflow-cpu,tensorflow)

setup: $(DEPS_STAMP) $(if $(filter 1,$(HOROVOD)),$(VENV)/.horovod-$(TF_EXTRA)-stamp)

# Stamped only once pip, setuptools and wheel are current (a failed upgrade is retried).
$(VENV)/.tools-stamp:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet -c constraints.txt pip setuptools wheel
	touch $@

$(DEPS_STAMP): constraints.txt requirements-dev.txt packages/*/pyproject.toml | $(VENV)/.tools-stamp
	$(PIP) uninstall --quiet --yes $(OTHER_TF) 2>/dev/null || true
	$(PIP) install --quiet --no-build-isolation -c constraints.txt -r requirements-dev.txt \
	    -e 'packages/dataflow[datasets]' -e 'packages/trainer[$(TF_EXTRA),plot,mlflow,shell]' -e packages/launcher
# The [keras] extra: tf-keras requires the `tensorflow` distribution; with its dependencies pip
# would put the CUDA `tensorflow` wheel over tensorflow-cpu, which already provides the module.
	$(PIP) install --quiet --no-deps -c constraints.txt tf-keras
	touch $@

$(VENV)/.horovod-$(TF_EXTRA)-stamp: $(DEPS_STAMP) scripts/build_horovod.sh
	scripts/build_horovod.sh $(VENV) $(WHEEL_CACHE)
	touch $@

# System packages the tests need: sshd (the launcher's ssh mode); Slurm, munge and Open MPI
# (towerpack under srun, sbatch and mpirun).
system-deps:
	@scripts/system_deps.sh

test: setup system-deps
	@$(PY) -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests" >&2; fi; exit $$rc

# The digits demo: one process per GPU where `nvidia-smi -L` lists GPUs, else 2 CPU processes.
DEMO_ARGS ?=
demo: setup
	@if nvidia-smi -L >/dev/null 2>&1; then procs="--gpus all"; else procs="--np 2"; fi; \
	$(VENV)/bin/launch $$procs examples/digits/train.py --fresh $(DEMO_ARGS)

# Every script in benchmarks/ and one table of ratios (QUICK=1: their quick modes).
QUICK ?=
bench: setup
	$(PY) scripts/bench.py $(if $(filter 1,$(QUICK)),--quick)

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build dist
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
	find packages -name '*.egg-info' -type d -prune -exec rm -rf {} +

# Also drops the cached Horovod wheel (the next setup rebuilds it).
distclean: clean
	rm -rf .cache
