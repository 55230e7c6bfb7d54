# Two entry points for a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_CARD := scenarios/merger-review.yaml

.PHONY: demo test lint typecheck unit bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/worldsim run $(DEMO_CARD) --policy branching --seed 6 --out traces/demo --force
	$(BIN)/worldsim verify traces/demo/merger-review__branching__s6.jsonl
	$(BIN)/worldsim replay traces/demo/merger-review__branching__s6.jsonl --timeline t0 --tick 3

test: $(STAMP)
	$(BIN)/ruff check worldsim tests benchmarks
	$(BIN)/mypy worldsim
	$(BIN)/pytest

bench: $(STAMP)
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
