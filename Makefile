# Two commands matter (README): `make run` and `make test`. Both install what is missing.
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
PYTHON ?= python3.11

STORE ?= sample
# INPUT: data/sample.txt, or data/sample-timestamped.tsv with WINDOW (scripts/run).
INPUT ?=
TOPIC ?= $(STORE)-lines
CHECKPOINT ?= .stack/checkpoints/$(STORE)
PARTITIONS ?= 4
STORE_TYPE ?=
TRIGGER ?= available-now
NODES ?= 1
# Windowed counts (README, "Window stores"): WINDOW=1m [HOP=] [GRACE=] [RETENTION=];
# sessioned counts: SESSION_GAP=5m [GRACE=] [RETENTION=].
WINDOW ?=
SESSION_GAP ?=
HOP ?=
GRACE ?=
RETENTION ?=
PYTEST_ARGS ?=

.PHONY: install venv jvm dist cluster-up cluster-down cluster-status bench-cluster run test test-unit bench-replay bench-query bench-maintenance bench-compaction maintenance lint browser netfilter airflow airflow-down stack-up stack-down stack-status stack-reset clean

install: venv jvm

venv: $(VENV)/.installed
$(VENV)/.installed: requirements.txt constraints.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -r requirements.txt -c constraints.txt
	$(BIN)/pip install -q --no-deps -e .
	# The editable install leaves a second copy of the package's metadata in the checkout; with
	# the checkout on sys.path (tests, scripts) Airflow would load the plugin's entry point twice.
	rm -rf statestore.egg-info
	touch $@

jvm:
	scripts/install-jvm

stack-up: install
	scripts/stack up
stack-down:
	scripts/stack down
stack-status:
	scripts/stack status
stack-reset:
	scripts/stack reset

# The local cluster (README "Running on a cluster"): 3 Cassandra nodes, 3 Kafka brokers and a
# Spark standalone master with 2 workers on 127.0.0.1-3, beside the single-node stack's ports.
cluster-up: install dist
	scripts/stack up --nodes 3
cluster-down:
	scripts/stack down --nodes 3
cluster-status:
	scripts/stack status --nodes 3

# The library as a zip for `spark-submit --py-files`: executors on other machines import it from there.
dist: venv
	$(BIN)/python -c 'from pathlib import Path; from statestore.conn.spark import library_archive as a; a(Path("dist/statestore.zip"))'

# Count INPUT into STORE through Kafka and Spark on the local stack, print the top 20 words.
# NODES=3: on the local cluster, submitted to its Spark standalone master.
run: install dist
	STORE=$(STORE) INPUT=$(INPUT) TOPIC=$(TOPIC) CHECKPOINT=$(CHECKPOINT) PARTITIONS=$(PARTITIONS) \
	STORE_TYPE=$(STORE_TYPE) TRIGGER=$(TRIGGER) NODES=$(NODES) \
	WINDOW=$(WINDOW) HOP=$(HOP) SESSION_GAP=$(SESSION_GAP) GRACE=$(GRACE) RETENTION=$(RETENTION) scripts/run

# Every test on the real stack; stops the stack afterwards if this target started it.
test: install browser netfilter
	@if scripts/stack status >/dev/null 2>&1; then started=0; else started=1; scripts/stack up; fi; \
	$(BIN)/pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$started = 1 ]; then scripts/stack down; fi; exit $$rc

# Unit tests only: no services needed.
test-unit: venv
	$(BIN)/pytest tests/unit $(PYTEST_ARGS)

# Our job side by side with Spark's RocksDB and HDFS state stores and a stateless ceiling
# (BENCHMARKS.md): the full run (5M words; about 35 minutes on 2 cores) and a run under 5 minutes.
bench: stack-up
	$(BIN)/python bench/streaming_compare.py
bench-quick: stack-up
	$(BIN)/python bench/streaming_compare.py --quick

# The replay-safety overhead, side by side with a blind counter-increment apply (BENCHMARKS.md).
bench-replay: stack-up
	$(BIN)/python bench/replay_overhead.py

# The same corpus on the single-node stack and on the local cluster, one after the other (BENCHMARKS.md).
bench-cluster: stack-up cluster-up
	$(BIN)/python bench/cluster_throughput.py

# HTTP point-get latency (with and without the read cache), the concurrency sweep (1-128 clients)
# and a 1M-entry full scan (BENCHMARKS.md; about 12 minutes).
bench-query: stack-up
	$(BIN)/python bench/query_api.py

# Audit and expiry rows/s at 1M and 10M entries (BENCHMARKS.md; about 30 minutes on 2 cores).
bench-maintenance: stack-up
	$(BIN)/python bench/maintenance.py

# Window tables under TWCS (their default) and UCS, STCS, LCS (about 15 minutes).
bench-compaction: stack-up
	$(BIN)/python bench/window_compaction.py

# The maintenance jobs on STORE, in the DAG's order, reports in REPORTS (README "Maintenance").
REPORTS ?= .stack/reports/maintenance
RETENTION ?= 30d
maintenance: install
	$(BIN)/python jobs/expire_state.py --store $(STORE) --retention $(RETENTION) --report-dir $(REPORTS)/expire
	$(BIN)/python jobs/compact_state.py --store $(STORE) --report-dir $(REPORTS)/compact
	$(BIN)/python jobs/audit_partitions.py --store $(STORE) --report-dir $(REPORTS)/audit
	$(BIN)/python jobs/validate_idempotency.py --store $(STORE) --checkpoint $(CHECKPOINT) --report-dir $(REPORTS)/validate

# Headless Chromium for the store page test, Prometheus and promtool for the monitoring tests
# (Debian's packages; this machine runs as root).
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; }
	@# Prometheus and promtool for the monitoring tests (a server the tests start on loopback;
	@# the package's own service is not started: policy-rc.d, or no init system, forbids it).
	@command -v prometheus >/dev/null && command -v promtool >/dev/null || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus; }

# iptables for the cluster tier's network partitions (tests/integration/cluster/partitions.py:
# DROP rules on loopback cut a node off, a network namespace of its own a driver; Debian's
# package, as root).
netfilter:
	@command -v iptables >/dev/null || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iptables; }

# A local Airflow (api-server, scheduler, dag-processor) wired to the local stack; prints URL and login.
airflow: stack-up
	scripts/airflow up
airflow-down:
	scripts/airflow down

# Style, and the import rules between the package's wings (pyproject.toml [tool.importlinter]:
# layers, forbidden imports, no cycles); the plugin's package is found on plugins/.
lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	PYTHONPATH=plugins $(BIN)/lint-imports --no-cache

clean:
	scripts/stack down || true
	rm -rf .stack/data .stack/logs .stack/checkpoints
