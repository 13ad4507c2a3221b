# Developer entry points. Everything runs inside .venv, created on demand.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: dev run test check lint typecheck pytest codegen codegen-check diagrams bench clean

# pip's and setuptools' chatter goes to a log, shown only when the install fails.
$(STAMP): pyproject.toml
	@echo "installing mind and its dependencies into $(VENV) (log: $(VENV)/install.log)"
	@$(PY) -m venv $(VENV)
	@( $(BIN)/pip install -q --upgrade pip && $(BIN)/pip install -q -e '.[dev]' ) \
		> $(VENV)/install.log 2>&1 || { cat $(VENV)/install.log; exit 1; }
	@touch $(STAMP)

dev: $(STAMP)

# "No model configured yet" is not a failed `make`: mind says how and exits 0
# (--unconfigured-ok); every other failure is propagated.
run: $(STAMP)
	@$(BIN)/mind --unconfigured-ok

## test: everything CI checks — lint, mypy --strict, codegen drift, the test suite.
test: $(STAMP) lint typecheck codegen-check pytest

## lint: ruff, and the import contracts of pyproject.toml (layers, no I/O in the core).
lint: $(STAMP)
	$(BIN)/ruff check mind codegen tests benchmarks
	$(BIN)/ruff format --check mind codegen tests benchmarks
	$(BIN)/lint-imports --no-cache

typecheck: $(STAMP)
	$(BIN)/mypy

# --transition-coverage: the full run also fails when an edge of a statechart that
# mind's runtime can take was never taken by it (tests/conftest.py).
pytest: $(STAMP)
	$(BIN)/pytest -q -n 2 --transition-coverage

codegen: $(STAMP)
	$(BIN)/python -m codegen

codegen-check: $(STAMP)
	$(BIN)/python -m codegen --check

diagrams: $(STAMP)
	$(BIN)/python -m codegen --diagrams

bench: $(STAMP)
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
