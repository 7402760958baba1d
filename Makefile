# Two commands for a fresh machine: `make demo` (install + run the demo job), `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

$(BIN)/synth: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

install: $(BIN)/synth

demo: install
	$(BIN)/synth run pipelines/demo.yaml
	$(BIN)/synth validate outputs/demo

# Browser and CJK font for the viewer/preview tests, from Debian's packages (never `playwright install`)
browser-deps:
	@if [ ! -x /usr/bin/chromium ] || [ ! -e /usr/share/fonts/truetype/wqy/wqy-microhei.ttc ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-wqy-microhei >/dev/null; \
	  else echo "browser-deps: not root; install chromium and fonts-wqy-microhei with apt-get"; fi; \
	fi

test: install browser-deps
	$(BIN)/python -m pytest -q

.PHONY: install demo test browser-deps
