# The two commands (README, docs/index.md):  make demo  and  make test  (make test-all: what CI runs)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test test-all setup jars lake lint check bench docs
SCALE ?= small
# two pytest workers, each running whole modules or groups of them (tests/conftest.py:
# SHARED_GROUPS), in the order conftest gives; XDIST= runs the tests in this process
XDIST ?= -n 2 --no-loadscope-reorder

# uv (from PyPI, into the venv) installs what pip would, from a cache of its own
# (~/.cache/uv): a fresh clone's setup 64 -> 27 s; on a set-up venv `make setup` takes
# 1.6-2 s, where pip's editable install alone took 5-6 s
UV ?= $(BIN)/uv pip install --quiet --python $(BIN)/python
# Offline first, from uv's cache: online, uv asks PyPI again for pyspark's source archive and,
# served without caching headers, builds it anew (2.3 GB of cache per fresh clone and pyspark
# version, never freed: a machine's disk filled up; a fresh clone's `make setup` 115 s / 222 CPU s
# online against 17 s / 17 CPU s from the cache, busy machine). Online only when the cache
# lacks something (a fresh machine, a new dependency); `make setup UV_CACHED=` goes online at
# once (newer releases within the pins). After an online install, `uv cache prune` drops the
# builds it superseded (it waits for the other environment's install under make -j2).
UV_CACHED ?= --offline
define install
	$(if $(UV_CACHED),$(UV) $(UV_CACHED) $(1) 2>/dev/null || ){ $(UV) $(1) && $(BIN)/uv cache prune --quiet; }
endef

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(BIN)/uv: | $(BIN)/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check uv

setup: $(BIN)/uv
	$(call install,-e ".[test]")
	# the reference of the `recommenders` compatibility profile (its own pins are too old for us)
	$(call install,--no-deps recommenders==1.2.1)

demo: setup
	$(BIN)/receval evaluate --config conf/demo.yaml

# hadoop-aws and the AWS SDK for the s3a:// tests, from Maven Central into ~/.cache/receval_spark/jars
# ($$RECEVAL_JARS) once; without Maven or Maven Central those tests skip with the reason
jars: setup
	$(BIN)/python tests/hadoop_aws.py

# Delta Lake and Iceberg (docs/tables.md): .venv-lake (pyspark 4.1) and the jars of tests/lake_env.py,
# built and fetched once; `tests/lake_env.py test` runs tests/lake there (skipped with the reason
# when PyPI or Maven Central cannot be reached); run by the system Python, not .venv's, so that
# `make -j2` (.ci/run) builds the two environments at once
lake:
	$(PYTHON) tests/lake_env.py

lint: setup
	$(BIN)/ruff check .

# ruff (lint) and mypy (strict on the public API); mypy's incremental cache lives outside the
# clone ($$RECEVAL_MYPY_CACHE, default ~/.cache/receval_spark/mypy), so a fresh clone (.ci/run)
# checks in 2-7 s instead of 15 (mypy checks each cached module against its file's hash)
RECEVAL_MYPY_CACHE ?= $(HOME)/.cache/receval_spark/mypy
check: lint
	$(BIN)/mypy --cache-dir "$(RECEVAL_MYPY_CACHE)"

# the contributors' loop: unit tests and in-process integration on tiny data
# (tiers: docs/contributing.md, Tests)
test: setup jars check
	$(BIN)/python -m pytest $(XDIST) -m "not slow"

# everything, as .ci/run: also the real-data parity (../shared/data), the demo as users run it,
# the standalone cluster, Spark Connect, the browser, the notebook and the fault tests;
# `make -j2 test-all` (.ci/run) prepares on both cores: the two environments at once, then the
# jars, the docs and the checks, before pytest
test-all: setup jars lake docs check
	$(BIN)/python -m pytest $(XDIST)

# the documentation site (docs/, mkdocs.yml; its reference pages generated from the code),
# warnings as errors, into ./site
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir site

# side by side with Spark ML, Microsoft Recommenders and a numpy floor (benchmarks/README.md)
bench: setup
	PYSPARK_PYTHON=$(abspath $(BIN))/python $(BIN)/python benchmarks/side_by_side.py --scale $(SCALE)
