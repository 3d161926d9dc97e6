# Two entry points do all set-up on a fresh machine:
#   make demo   install, then train OPD on FetchReach and print the summary + learning-curve path
#   make test   install (with the test, ALFWorld, Ray and WandB extras), then run the default test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The CPU wheel first: an unpinned torch pulls a multi-GB CUDA build.
TORCH_PIN := torch==2.13.0

.PHONY: install install-test demo test test-slow alfworld bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q "$(TORCH_PIN)"
	$(BIN)/pip install -q -e .
	touch $@

# fast-downward-textworld (an alfworld dependency) builds with a bare `python build.py`;
# the venv's bin must come first on PATH or a pyenv shim picks another interpreter.
$(VENV)/.installed-test: $(VENV)/.installed
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/pip install -q -e ".[test,alfworld,ray,wandb]"
	touch $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test
alfworld: $(VENV)/.installed-test

demo: install
	rm -rf runs/demo
	$(BIN)/agentic-rl train configs/opd_fetch_reach.yaml --log-dir runs/demo

test: install-test
	$(BIN)/python -m pytest

test-slow: install-test
	$(BIN)/python -m pytest -m slow

clean:
	rm -rf runs .pytest_cache
