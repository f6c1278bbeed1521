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
# Written when this Makefile creates the environment: only then does make install into it. An environment VENV points
# at that make did not create is the user's: make installs nothing there, says what to run, and goes on if posbench is
# installed in it (`touch $(VENV)/.posbench-created` hands it to make).
ENV_MARK := $(VENV)/.posbench-created
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
# (REF: the reference, default rope10k, fixed before any score is read; STRICT: fail when anything is missing;
# BRIDGE: a published study of one domain at other settings, ranked in that domain: pipelines.analysis.bridge)
DOMAINS ?= all-present
REF ?=
STRICT ?=
WITH ?=
BRIDGE ?=
# make settle DOMAIN=jsb MAX_SEEDS=10 PLAN=1 [WITH=docs/results/jsb-cpu]; make publish DOMAINS=jsb STUDY=docs/results/jsb-cpu;
# make reproduce STUDY=docs/results/jsb-cpu RUNS="rope10k/0 darope/2"
MAX_SEEDS ?= 10
PLAN ?=
STUDY ?=
RUNS ?=

help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_%-]+:.*## / {printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(ENV_STAMP): pyproject.toml
	@test -x $(PY) || { $(PYTHON) -m venv $(VENV) && touch $(ENV_MARK); }
	@if [ ! -e $(ENV_MARK) ]; then \
		if $(PY) -c "import torch" 2>/dev/null; then spec=""; else spec='"$(TORCH_SPEC)" '; fi; \
		echo "make installs nothing into $(VENV): this Makefile did not create it. To install posbench (editable, with" \
			"its dev extra$${spec:+ and $(TORCH_SPEC)}) as pyproject.toml asks, run:" >&2; \
		echo "    $(PY) -m pip install $${spec}-e \".[dev]\"" >&2; \
		echo "(or touch $(ENV_MARK) to let make install into it)" >&2; \
		$(PY) -c "import importlib.metadata as m; m.version('posbench')" 2>/dev/null \
			|| { echo "posbench is not installed in $(VENV): stopping" >&2; exit 1; }; \
	elif $(PY) -c "import torch" 2>/dev/null; then \
		$(PY) -m pip install -q -e ".[dev]" && touch $@; \
	else \
		$(PY) -m pip install -q "$(TORCH_SPEC)" -e ".[dev]" && touch $@; \
	fi

env: $(ENV_STAMP) ## Create the environment (.venv) if missing; install into it only if make created it

test: $(ENV_STAMP) ## Run the test suite (this is what CI runs; TEST_WORKERS=1 for one process)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile tests

test-fast: $(ENV_STAMP) ## The tests that neither train a model nor start a process (for development)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not slow" tests

train: $(ENV_STAMP) ## Train a domain's roster x seeds (DOMAIN=.. or all, ROSTER, SEEDS, PRESET, LAUNCHER=local|slurm, WITH=<study>: skip its runs)
	$(PY) -m pipelines.sweep --domain $(DOMAIN) $(if $(ENCODINGS),--encodings $(ENCODINGS),--roster $(ROSTER)) \
		--seeds $(SEEDS) --preset $(PRESET) $(if $(WITH),--with $(WITH)) --launcher $(LAUNCHER) $(ARGS)

compare: $(ENV_STAMP) ## Compare the runs: results/summary.md (+ csv, json, figures, index.html) and results/<domain>/ (WITH=docs/results/<study>, BRIDGE=<a study of one domain at other settings>)
	$(PY) -m pipelines.compare --domains $(DOMAINS) --runs runs --out results $(if $(REF),--ref $(REF)) \
		$(if $(filter 1,$(STRICT)),--strict) $(if $(WITH),--with $(WITH)) $(if $(BRIDGE),--bridge $(BRIDGE))

settle: $(ENV_STAMP) ## Train the seeds a domain's verdicts need, group-sequentially (DOMAIN, MAX_SEEDS, PLAN=1: print only, RECORD=1: record the look, train nothing, THROUGH_LOOK=k: stop once look k is recorded)
	$(PY) -m pipelines.settle --domain $(DOMAIN) $(if $(WITH),--with $(WITH)) --max-seeds $(MAX_SEEDS) \
		$(if $(filter 1,$(PLAN)),--plan) $(if $(filter 1,$(RECORD)),--record) \
		$(if $(THROUGH_LOOK),--through-look $(THROUGH_LOOK)) $(ARGS)

publish: $(ENV_STAMP) ## Write the runs' evidence, report and page into a study folder others can join (DOMAINS=jsb STUDY=docs/results/...; ARGS=--replace)
	$(PY) -m pipelines.publish --runs runs --domains $(DOMAINS) --out $(STUDY) $(if $(WITH),--with $(WITH)) $(ARGS)

readme-tables: $(ENV_STAMP) ## Render README.md's result tables from the studies they name (after a publish or compare)
	$(PY) -m pipelines.report.readme_tables README.md --write

reproduce: $(ENV_STAMP) ## Re-train published runs and compare them with the study (STUDY=docs/results/... RUNS="rope10k/0")
	$(PY) -m pipelines.reproduce --study $(STUDY) --runs $(RUNS)

throughput: $(ENV_STAMP) ## Tokens/s, memory, FLOP use of every encoding: results/throughput.{csv,png} (PRESET, ARGS)
	$(PY) -m pipelines.throughput --preset $(PRESET) $(ARGS)

gpu-check: $(ENV_STAMP) ## On a CUDA GPU: paper presets in bf16, CoPE tiles, ratios, matmul-peak share: results/gpu_check/report.md (ARGS)
	$(PY) -m pipelines.gpu_check $(ARGS)

demo: $(ENV_STAMP) ## Small real comparison of the full roster on synthetic tasks (CPU, about 10 minutes on 2 cores)
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

.PHONY: help env test test-fast train compare settle publish readme-tables reproduce throughput gpu-check demo lint format clean
