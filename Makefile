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
	    -e 'packages/dataflow[datasets,viz]' -e 'packages/trainer[$(TF_EXTRA),plot,mlflow,shell,contrib]' -e packages/launcher
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

# TensorFlow turns oneDNN on by default only on some x86 CPUs, and kernels differ with it: the
# tests marked data_format run a second time with oneDNN switched the other way, so that a green
# run does not depend on the CPU it got.
ONEDNN_OTHER = $(PY) -c "from tensorflow.python.util import _pywrap_util_port as p; print(0 if p.IsMklEnabled() else 1)"

# The reference's 0.11 wheel, for tests that run its bundled unit tests through `towerpack port`:
# downloaded into the cache and checked, never installed or imported.
REFERENCE_WHEEL := .cache/reference/tensorpack-0.11-py2.py3-none-any.whl
REFERENCE_SHA256 := afcdaccf6e8e7d61c98970646d57b1c22372ddd712c462477a90f53e3994c4a1

$(REFERENCE_WHEEL): | $(VENV)/.tools-stamp
	$(PIP) download --quiet --no-deps --only-binary=:all: --dest $(@D) tensorpack==0.11
	echo "$(REFERENCE_SHA256)  $@" | sha256sum --check --quiet || { rm -f $@; exit 1; }

test: setup system-deps $(REFERENCE_WHEEL)
	@$(PY) -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests" >&2; fi; \
	if [ $$rc -ne 0 ]; then exit $$rc; fi; \
	other=$$(TF_CPP_MIN_LOG_LEVEL=3 $(ONEDNN_OTHER) 2>/dev/null) || exit 1; \
	echo "make test: the data_format tests again, with TF_ENABLE_ONEDNN_OPTS=$$other"; \
	TF_ENABLE_ONEDNN_OPTS=$$other $(PY) -m pytest -q -m data_format $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then rc=0; fi; exit $$rc

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
