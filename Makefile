# posbench: one command from raw data to a publishable table. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Taken only when the environment has no torch yet: on this machine it is the local CPU wheel.
# A GPU user points VENV at an environment that already holds a CUDA torch, which is kept.
TORCH_SPEC ?= torch==2.13.0
ENV_STAMP := $(VENV)/.posbench-installed
# pytest-xdist workers for make test (one per core); TEST_WORKERS=1 runs them in one worker
TEST_WORKERS ?= auto

# Sweep settings: make train DOMAIN=jsb ROSTER=paper SEEDS="0 1 2" PRESET=tiny LAUNCHER=local ARGS="trainer.max_steps=100"
# (ENCODINGS="myrope rope10k" instead of a roster)
DOMAIN ?= synthetic
ROSTER ?= paper
ENCODINGS ?=
SEEDS ?= 0 1 2
PRESET ?= tiny
LAUNCHER ?= local
ARGS ?=
# Report settings: make compare DOMAINS="jsb maestro" REF=darope STRICT=1 WITH=docs/results/jsb-cpu
# (REF: the reference, default rope10k, fixed before any score is read; STRICT: fail when anything is missing)
DOMAINS ?= all-present
REF ?=
STRICT ?=
WITH ?=
# make settle DOMAIN=jsb MAX_SEEDS=10 PLAN=1 [WITH=docs/results/jsb-cpu]; make publish DOMAINS=jsb STUDY=docs/results/jsb-cpu;
# make reproduce STUDY=docs/results/jsb-cpu RUNS="rope10k/0 darope/2"
MAX_SEEDS ?= 10
PLAN ?=
STUDY ?=
RUNS ?=

help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_%-]+:.*## / {printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(ENV_STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@if $(PY) -c "import torch" 2>/dev/null; then \
		$(PY) -m pip install -q -e ".[dev]"; \
	else \
		$(PY) -m pip install -q "$(TORCH_SPEC)" -e ".[dev]"; \
	fi
	@touch $@

env: $(ENV_STAMP) ## Create the environment (.venv) if missing

test: $(ENV_STAMP) ## Run the test suite (this is what CI runs; TEST_WORKERS=1 for one process)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile tests

test-fast: $(ENV_STAMP) ## The tests that neither train a model nor start a process (for development)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not slow" tests

train: $(ENV_STAMP) ## Train a domain's roster x seeds (DOMAIN=.. or all, ROSTER, SEEDS, PRESET, LAUNCHER=local|slurm, WITH=<study>: skip its runs)
	$(PY) -m pipelines.sweep --domain $(DOMAIN) $(if $(ENCODINGS),--encodings $(ENCODINGS),--roster $(ROSTER)) \
		--seeds $(SEEDS) --preset $(PRESET) $(if $(WITH),--with $(WITH)) --launcher $(LAUNCHER) $(ARGS)

compare: $(ENV_STAMP) ## Compare the runs: results/summary.md (+ csv, json, figures, index.html) and results/<domain>/ (WITH=docs/results/<study>)
	$(PY) -m pipelines.compare --domains $(DOMAINS) --runs runs --out results $(if $(REF),--ref $(REF)) \
		$(if $(filter 1,$(STRICT)),--strict) $(if $(WITH),--with $(WITH))

settle: $(ENV_STAMP) ## Train the seeds a domain's verdicts need, group-sequentially (DOMAIN, MAX_SEEDS, PLAN=1: print only, RECORD=1: record the look, train nothing)
	$(PY) -m pipelines.settle --domain $(DOMAIN) $(if $(WITH),--with $(WITH)) --max-seeds $(MAX_SEEDS) \
		$(if $(filter 1,$(PLAN)),--plan) $(if $(filter 1,$(RECORD)),--record) $(ARGS)

publish: $(ENV_STAMP) ## Write the runs' evidence, report and page into a study folder others can join (DOMAINS=jsb STUDY=docs/results/...; ARGS=--replace)
	$(PY) -m pipelines.publish --runs runs --domains $(DOMAINS) --out $(STUDY) $(if $(WITH),--with $(WITH)) $(ARGS)

reproduce: $(ENV_STAMP) ## Re-train published runs and compare them with the study (STUDY=docs/results/... RUNS="rope10k/0")
	$(PY) -m pipelines.reproduce --study $(STUDY) --runs $(RUNS)

throughput: $(ENV_STAMP) ## Tokens/s, memory, FLOP use of every encoding: results/throughput.{csv,png} (PRESET, ARGS)
	$(PY) -m pipelines.throughput --preset $(PRESET) $(ARGS)

gpu-check: $(ENV_STAMP) ## On a CUDA GPU: paper presets in bf16, CoPE tiles, ratios, matmul-peak share: results/gpu_check/report.md (ARGS)
	$(PY) -m pipelines.gpu_check $(ARGS)

demo: $(ENV_STAMP) ## Small real comparison of the full roster on synthetic tasks (CPU, about 11 minutes)
	$(PY) -m pipelines.demo

data-%: $(ENV_STAMP) ## Download (or copy from POSBENCH_MIRROR) and tokenise a domain: data-jsb, data-hrg, ...
	$(PY) -m pipelines.prepare --domain $* $(ARGS)

lint: $(ENV_STAMP) ## ruff over the tree
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(ENV_STAMP) ## Apply ruff's fixes and formatting
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

clean: ## Remove runs and results (keeps data and the environment)
	rm -rf runs results

.PHONY: help env test test-fast train compare settle publish reproduce throughput gpu-check demo lint format clean
