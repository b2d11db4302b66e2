# Cowork-Gym developer targets. CI (.ci/run) calls these too.
PY      ?= .venv/bin/python
PYTEST  ?= .venv/bin/pytest
SHELL   := /bin/bash

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*## "}{printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2}'

.venv/.installed: pyproject.toml
	test -x $(PY) || python3.12 -m venv .venv || $$HOME/.pyenv/versions/3.12.1/bin/python -m venv .venv
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,operator,llm,harbor]'
	touch $@

.PHONY: install
install: .venv/.installed ## Create .venv and install the project with all extras

.PHONY: demo
demo: install ## Synthesize and check environments on the embedded default (no cluster, no model)
	.venv/bin/cowork-gym synth --count 6 --out out/demo --workers 2

.PHONY: test
test: install ## Run the test suite (unit + integration; test-bed tests when COWORKGYM_TESTBED=1)
	$(PYTEST) -q

.PHONY: lint
lint: install ## ruff + mypy
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy coworkgym

.PHONY: verify
verify: lint test ## Everything CI checks: lint, types, tests

.PHONY: testbed-build
testbed-build: ## Build the test-bed binaries from Go modules (cached outside the repo)
	testbed/build.sh

.PHONY: testbed-up
testbed-up: install ## Start the local Kubernetes control plane + S3 server
	$(PY) -m coworkgym_testbed up

.PHONY: testbed-down
testbed-down: ## Stop the test-bed
	$(PY) -m coworkgym_testbed down

.PHONY: bench
bench: install ## Run the benchmark scripts (print figures, not pass/fail)
	$(PY) benchmarks/detector_overhead.py
