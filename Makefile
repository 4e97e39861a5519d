# The two commands of the README:  make demo  and  make test
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test setup lint bench
SCALE ?= small

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

setup: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test]"
	# the reference of the `recommenders` compatibility profile (its own pins are too old for us)
	$(BIN)/python -m pip install --quiet --no-deps recommenders==1.2.1

demo: setup
	$(BIN)/receval evaluate --config conf/demo.yaml

lint: setup
	$(BIN)/ruff check .

test: setup
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m pytest

# side by side with Spark ML, Microsoft Recommenders and a numpy floor (benchmarks/README.md)
bench: setup
	PYSPARK_PYTHON=$(abspath $(BIN))/python $(BIN)/python benchmarks/side_by_side.py --scale $(SCALE)
