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

test: install
	$(BIN)/python -m pytest -q

.PHONY: install demo test
