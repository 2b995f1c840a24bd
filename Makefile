# The developer's front door. `make demo` and `make test` set everything up themselves.
VENV := .venv
BIN := $(VENV)/bin
# Caches (TPC-H files, the demo warehouse) stay inside the checkout unless told otherwise.
export SKETCH_HOME ?= $(CURDIR)/.cache
PYTEST_ARGS ?=

.PHONY: setup demo test lint check-lowest bench bench-workload long-run clean-cache

setup:
	@bash scripts/bootstrap.sh

# The story through Airflow: load, capture, loads with inserts and deletes, policy-triggered
# maintenance, refresh before the report, the report with skipping (`sketch demo` tells the
# core's story on TPC-H without Airflow).
demo: setup
	$(BIN)/python -m examples.airflow_demo

# Quick benchmarks by default; `make bench SF=1 SYNTHETIC_ROWS=10000000` for the sizes the
# issues' targets use.
SF ?= 0.1
SYNTHETIC_ROWS ?= 1000000
bench: setup
	$(BIN)/python -m benchmarks.capture_use --scale $(SF)
	$(BIN)/python -m benchmarks.maintenance --scale $(SF)
	$(BIN)/python -m benchmarks.maintenance_synthetic --rows $(SYNTHETIC_ROWS)
	$(BIN)/python -m benchmarks.attribute_choice --scale $(SF) --rows $(SYNTHETIC_ROWS)
	$(BIN)/python -m benchmarks.table_writes --rows $(SYNTHETIC_ROWS)

# When to maintain, recapture or skip (issue 6): four strategies over mixed update/report
# streams. The issue's size is WORKLOAD_OPS=1000 (hours: WORKLOAD_FLAGS=--resume continues a
# run that was stopped, from the cells already measured).
WORKLOAD_ROWS ?= 1000000
WORKLOAD_OPS ?= 100
WORKLOAD_FLAGS ?=
bench-workload: setup
	$(BIN)/python -m benchmarks.workload --rows $(WORKLOAD_ROWS) --ops $(WORKLOAD_OPS) $(WORKLOAD_FLAGS)

# Reliability's long run (issue 8): sketches kept up by the intermittent-maintenance DAG across
# commits, every version checked against a fresh capture (docs/reliability.md).
LONG_RUN_FLAGS ?= --sketches 50 --tables 5 --commits 200
long-run: setup
	$(BIN)/python -m benchmarks.long_run $(LONG_RUN_FLAGS)

lint: setup
	$(BIN)/ruff check sketch_core plugins dags tests benchmarks examples scripts
	$(BIN)/ruff format --check sketch_core plugins dags tests benchmarks examples scripts
	$(BIN)/mypy

# pytest exits 5 when it collected no tests: that is a failure here, not a pass.
test: setup lint
	@$(BIN)/pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "error: pytest collected no tests" >&2; exit 1; fi; exit $$rc

# pyproject.toml's lower bounds, checked: the lowest allowed dependencies installed together,
# every module imported and the metastore-free tests run on them (run by CI after `make test`).
check-lowest: setup
	$(BIN)/python scripts/check_lowest_versions.py

clean-cache:
	rm -rf $(SKETCH_HOME)
