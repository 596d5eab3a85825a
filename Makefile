# Two commands matter (README.md): `make run` and `make test`. Both install what is missing.
# A bare `make` lists the targets (`make help`): the `## ` text on each target's line.
SHELL := /bin/bash
MAKEFILE := $(lastword $(MAKEFILE_LIST))
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
# Windowed counts (docs/stores.md, window stores): WINDOW=1m [HOP=] [GRACE=] [RETENTION=];
# sessioned counts: SESSION_GAP=5m [GRACE=] [RETENTION=].
# RETENTION is also `make maintenance`'s expiry of key-value stores (empty: 30d).
WINDOW ?=
SESSION_GAP ?=
HOP ?=
GRACE ?=
RETENTION ?=
PYTEST_ARGS ?=

.DEFAULT_GOAL := help

.PHONY: help install venv jvm dist cluster-up cluster-down cluster-status bench bench-quick bench-timed bench-aggregate bench-cluster bench-rescale run test test-unit bench-replay bench-query bench-overload bench-soak bench-stores bench-maintenance bench-compaction bench-dataframe maintenance lint browser netfilter airflow airflow-down stack-up stack-down stack-status stack-reset stop-all simulate clean

help: ## this list of targets (what a bare `make` prints)
	@echo 'usage: make TARGET [VARIABLE=value ...] (variables: the top of the Makefile)'
	@awk -F ':.*## ' '/^[a-z][a-z0-9-]*:.*## / {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE)

install: venv jvm ## what is missing of the venv and the JVM jars (venv, jvm)

venv: $(VENV)/.installed ## .venv with the requirements and the package (editable)
$(VENV)/.installed: requirements.txt constraints.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -r requirements.txt -c constraints.txt
	$(BIN)/pip install -q --no-deps -e .
	# The editable install leaves a second copy of the package's metadata in the checkout; with
	# the checkout on sys.path (tests, scripts) Airflow would load the plugin's entry point twice.
	rm -rf statestore.egg-info
	touch $@

jvm: ## the Cassandra, Kafka and Spark-Kafka jars into .stack/lib (Maven Central)
	scripts/install-jvm

stack-up: install ## start the local stack (Cassandra, Kafka on 127.0.0.1)
	scripts/stack up
stack-down: ## stop the local stack
	scripts/stack down
stack-status: ## what of the local stack runs, and where
	scripts/stack status
stack-reset: ## stop the local stack and delete its data and logs
	scripts/stack reset

# Everything this checkout's scripts started, by their recorded pids: Airflow, the local cluster,
# the two-dc nodes, the single-node stack (benchmarks use the same stacks). Then the machine
# report, which names any of the project's servers still running (from another checkout, say).
# Run it before you finish: CI runs on the same machine, and servers left up take its cores.
stop-all: ## stop everything this checkout started (Airflow, cluster, stack), then report the machine
	scripts/airflow down
	@if [ -x $(BIN)/python ]; then scripts/stack stop-all; fi
	@python3 stack/machine.py report

# The local cluster (docs/cluster.md): 3 Cassandra nodes, 3 Kafka brokers and a
# Spark standalone master with 2 workers on 127.0.0.1-3, beside the single-node stack's ports.
cluster-up: install dist ## start the local cluster: 3 Cassandra, 3 Kafka, Spark master + 2 workers
	scripts/stack up --nodes 3
cluster-down: ## stop the local cluster
	scripts/stack down --nodes 3
cluster-status: ## what of the local cluster runs, and where
	scripts/stack status --nodes 3

# The library as a zip for `spark-submit --py-files`: executors on other machines import it from there.
dist: venv ## dist/statestore.zip, the library for spark-submit --py-files
	$(BIN)/python -c 'from pathlib import Path; from statestore.conn.spark import library_archive as a; a(Path("dist/statestore.zip"))'

# Count INPUT into STORE through Kafka and Spark on the local stack, print the top 20 words.
# NODES=3: on the local cluster, submitted to its Spark standalone master.
run: install dist ## count INPUT into STORE through Kafka and Spark, print the top 20 words
	STORE=$(STORE) INPUT=$(INPUT) TOPIC=$(TOPIC) CHECKPOINT=$(CHECKPOINT) PARTITIONS=$(PARTITIONS) \
	STORE_TYPE=$(STORE_TYPE) TRIGGER=$(TRIGGER) NODES=$(NODES) \
	WINDOW=$(WINDOW) HOP=$(HOP) SESSION_GAP=$(SESSION_GAP) GRACE=$(GRACE) RETENTION=$(RETENTION) scripts/run

# Every test on the real stack; stops the stack afterwards if this target started it.
# Two lanes side by side: the second runs the cluster tier (its own 3-node cluster, on addresses
# and ports apart from the single-node stack), then the single-node tests of SECOND_LANE, which
# even out the lanes' lengths; the first runs every other test. OUTAGE_TESTS stop and start the
# single-node stack's own servers: they run first, alone (beside the cluster's start-up one of
# them failed once), on a node with few tables yet. The second lane's output follows the
# first's. Each lane's temporary files live in its own folder outside the checkout (the
# packaging tests tell an installed copy from the checkout by its path), kept when a test
# failed. Each lane's time in seconds goes to .stack/logs/test-lane-times.txt and is printed at
# the end (.ci/run prints it again beside the machine's load over the run). TEST_LANES=1 runs
# everything in one pytest.
TEST_LANES ?= 2
CLUSTER_TESTS = tests/integration/cluster
SECOND_LANE = $(CLUSTER_TESTS) tests/integration/packaging tests/integration/airflow
OUTAGE_TESTS = tests/integration/stream/test_outages.py
test: install browser netfilter ## every test, on the real stack (started and stopped if not running)
	@if scripts/stack status >/dev/null 2>&1; then started=0; else started=1; scripts/stack up; fi; \
	mkdir -p .stack/logs; times=.stack/logs/test-lane-times.txt; : > $$times; \
	lap() { echo "$$1 $$(( $$(date +%s) - $$2 ))" >> $$times; }; \
	if [ "$(TEST_LANES)" = 1 ]; then \
	  began=$$(date +%s); $(BIN)/pytest $(PYTEST_ARGS); rc=$$?; lap "one lane" $$began; \
	else \
	  temp=$$(mktemp -d -t statestore-tests.XXXXXX); \
	  echo "== the outage tests, first and alone ($(OUTAGE_TESTS)):"; \
	  began=$$(date +%s); $(BIN)/pytest $(OUTAGE_TESTS) $(PYTEST_ARGS) --basetemp=$$temp/outages; outage_rc=$$?; \
	  lap "outage tests" $$began; began=$$(date +%s); \
	  ( $(BIN)/pytest $(SECOND_LANE) $(PYTEST_ARGS) --basetemp=$$temp/second; second_rc=$$?; \
	    lap "second lane" $$began; exit $$second_rc ) > .stack/logs/test-second-lane.log 2>&1 & lane=$$!; \
	  echo "== the first lane (every other test):"; \
	  $(BIN)/pytest $(addprefix --ignore=,$(SECOND_LANE) $(OUTAGE_TESTS)) $(PYTEST_ARGS) --basetemp=$$temp/main; rc=$$?; \
	  lap "first lane" $$began; \
	  wait $$lane; second_rc=$$?; \
	  echo "== the second lane ($(SECOND_LANE), exit $$second_rc):"; cat .stack/logs/test-second-lane.log; \
	  for lane_rc in $$outage_rc $$second_rc; do if [ $$rc = 0 ]; then rc=$$lane_rc; fi; done; \
	  if [ $$rc = 0 ]; then rm -rf $$temp; fi; \
	fi; \
	echo "== lanes (seconds):"; cat $$times; \
	if [ $$started = 1 ]; then scripts/stack down; fi; exit $$rc

# The batch protocol's simulator (tests/simulation; docs/consistency.md, "The protocol simulator"):
# seed after seed for SIM_SECONDS, every event included, the known bugs' too; a failure prints its
# seed and the shortest sequence of events and exits 1. SEED=S starts at seed S (SIM_SECONDS=0: that
# seed only); EXCLUDE=NAME,... leaves the events of known bugs out (machine.KNOWN_BUGS, cache.CACHE_KNOWN_BUGS).
SIM_SECONDS ?= 600
SEED ?=
EXCLUDE ?=
simulate: venv ## the batch protocol's simulator for SIM_SECONDS (600): a failure prints its seed
	$(BIN)/python -m tests.simulation --seconds $(SIM_SECONDS) $(if $(SEED),--seed $(SEED)) $(if $(EXCLUDE),--exclude $(EXCLUDE))

# Unit tests only: no services needed.
test-unit: venv ## the unit tests only: no services needed
	$(BIN)/pytest tests/unit $(PYTEST_ARGS)

# The bench* targets write their raw results to .stack/bench-results/<benchmark>/ (git-ignored);
# PUBLISH=1 writes bench/results/<benchmark>/, the committed runs BENCHMARKS.md cites (bench/README.md).
BENCH_ENV = STATESTORE_BENCH_PUBLISH=$(PUBLISH)
# Each benchmark runs through scripts/with-stack: it starts the stack (and the cluster) if they are
# down and stops what it started at the end (STATESTORE_KEEP_STACK=1 keeps it; `make stop-all`).
WITH_STACK = scripts/with-stack
WITH_CLUSTER = scripts/with-stack --cluster
BENCH_OUT = $(if $(filter-out 0,$(PUBLISH)),bench/results,.stack/bench-results)

# Our job side by side with Spark's RocksDB and HDFS state stores and a stateless ceiling
# (BENCHMARKS.md): the full run (5M words, seven systems, every phase; last timed whole at 34
# minutes with five systems, on older code: BENCHMARKS.md, "How long make bench takes") and a
# 100k-word run to try the harness (never published).
bench: install ## our job beside Spark's RocksDB and HDFS stores: the full run
	$(WITH_STACK) env $(BENCH_ENV) $(BIN)/python bench/streaming_compare/streaming_compare.py
bench-quick: install ## the same on 100k words, to try the harness
	$(WITH_STACK) $(BIN)/python bench/streaming_compare/streaming_compare.py --quick

# Windows (tumbling and hopping) and sessions beside key-value, ours and Spark's on RocksDB, and
# Spark counting each batch alone (what the state costs is the rest), over a corpus spanning an
# hour of event time; throughput, two rounds (BENCHMARKS.md; about 12 min).
bench-timed: install ## windows, sessions, key-value: ours beside Spark's RocksDB and batch counts
	$(WITH_STACK) env $(BENCH_ENV) $(BIN)/python bench/streaming_compare/streaming_compare.py --timed

# JSON events (user, amount, event time; Zipf users) aggregated per user, count, sum and max: ours
# into a key-value aggregate store beside Spark's groupBy(user).agg() on RocksDB, and the same per
# user and 1-minute window: ours into a window aggregate store beside Spark's groupBy(window(ts),
# user).agg(); throughput, three rounds, every value checked against the ground truth (BENCHMARKS.md;
# about 10 min a pair).
bench-aggregate: install ## JSON events per user and per minute: ours beside Spark's groupBy().agg(), RocksDB
	$(WITH_STACK) env $(BENCH_ENV) $(BIN)/python bench/streaming_compare/streaming_compare.py --aggregate

# The replay-safety overhead, side by side with a blind counter-increment apply (BENCHMARKS.md).
bench-replay: install ## the replay-safety overhead against a blind increment
	mkdir -p $(BENCH_OUT)/replay_overhead
	set -o pipefail; $(WITH_STACK) env $(BENCH_ENV) $(BIN)/python bench/replay_overhead/replay_overhead.py 2>&1 | tee $(BENCH_OUT)/replay_overhead/replay_overhead.log

# The same corpus on the single-node stack and on the local cluster, one after the other (BENCHMARKS.md).
bench-cluster: install dist ## one corpus on the single-node stack, then on the local cluster
	$(WITH_CLUSTER) env $(BENCH_ENV) $(BIN)/python bench/cluster_throughput/cluster_throughput.py

# Rescaling without a restore (BENCHMARKS.md): partitions added under a running stream, and a
# store continued by a job with twice the executors, against Spark's RocksDB store (about 25 min).
bench-rescale: install dist ## partitions added mid-stream; twice the executors, ours and RocksDB
	$(WITH_CLUSTER) env $(BENCH_ENV) $(BIN)/python bench/rescale/rescale.py

# HTTP point-get latency (with and without the read cache), the concurrency sweep (1-128 clients)
# and a 1M-entry full scan (BENCHMARKS.md; not timed on today's code).
bench-query: install ## HTTP point-get latency, the concurrency sweep and a 1M-entry scan
	mkdir -p $(BENCH_OUT)/query_api
	set -o pipefail; $(WITH_STACK) $(BIN)/python bench/query_api/query_api.py | tee $(BENCH_OUT)/query_api/query_api.md

# The API under overload: one worker's capacity, then offered rates of 1, 1.5, 2 and 4 times it
# from an outside load generator in Go (an open loop), goodput and p99 (BENCHMARKS.md; about 5 min).
bench-overload: install ## HTTP goodput and p99 at 1x-4x one worker's capacity, offered by a Go load generator
	$(WITH_STACK) env $(BENCH_ENV) $(BIN)/python bench/query_api/overload.py

# The soak: the stream for an hour at a steady rate, the API under light load, the maintenance
# jobs once in the middle; memory, disk, lag and batch durations every minute (BENCHMARKS.md).
bench-soak: install ## an hour of the stream with the API and maintenance beside it, sampled every minute
	$(WITH_STACK) env $(BENCH_ENV) $(BIN)/python bench/soak/soak.py

# 500 stores in one keyspace, each written by a short stream; what grows and what readers wait
# for every 50 stores (BENCHMARKS.md; about 10 min). On the stack's default 1 GB heap Cassandra
# runs out of heap at about 255 stores (the finding); for all 500, start the stack with
# STATESTORE_CASSANDRA_HEAP=3g (`scripts/stack down --only cassandra` first).
bench-stores: install ## 500 stores in one keyspace: Cassandra's heap, prepared statements, listing times
	$(WITH_STACK) env $(BENCH_ENV) $(BIN)/python bench/many_stores/many_stores.py

# Audit and expiry rows/s at 1M and 10M entries (BENCHMARKS.md; not timed on today's code).
bench-maintenance: install ## audit and expiry rows/s at 1M and 10M entries
	$(WITH_STACK) env $(BENCH_ENV) $(BIN)/python bench/maintenance/maintenance.py

# Window tables under TWCS (their default) and UCS, STCS, LCS (BENCHMARKS.md).
bench-compaction: install ## window tables under TWCS, UCS, STCS and LCS
	$(WITH_STACK) env $(BENCH_ENV) $(BIN)/python bench/window_compaction/window_compaction.py

# A store of 1M entries scanned as a Spark DataFrame (the livestate data source) and by
# `statestore dump`, in rows/s (BENCHMARKS.md).
bench-dataframe: install ## a 1M-entry store scanned as a DataFrame and by statestore dump, rows/s
	$(WITH_STACK) env $(BENCH_ENV) $(BIN)/python bench/dataframe_scan/dataframe_scan.py

# The maintenance jobs on STORE, in the DAG's order, reports in REPORTS (docs/maintenance.md),
# laid out as the state_maintenance DAG lays them out (<job>.json/.md/.html in REPORTS, a store's
# validation in REPORTS/validate_idempotency/STORE), so the local Airflow's store page shows them:
# REPORTS is its STATESTORE_REPORT_DIR too (`make airflow`).
# Key-value stores expire at RETENTION of stream time (30d when empty); window and session
# stores by their own retention, whatever RETENTION says.
REPORTS ?= $(or $(STATESTORE_REPORT_DIR),$(or $(STATESTORE_STACK_DIR),.stack)/reports/maintenance)
maintenance: install ## expire (RETENTION, 30d), compact, audit and validate STORE; reports in REPORTS
	$(BIN)/python jobs/expire_state.py --store $(STORE) --retention $(or $(RETENTION),30d) --report-dir $(REPORTS)
	$(BIN)/python jobs/compact_state.py --store $(STORE) --report-dir $(REPORTS)
	$(BIN)/python jobs/audit_partitions.py --store $(STORE) --report-dir $(REPORTS)
	$(BIN)/python jobs/validate_idempotency.py --store $(STORE) --checkpoint $(CHECKPOINT) --report-dir $(REPORTS)/validate_idempotency/$(STORE)

# Headless Chromium for the store page test, Prometheus and promtool for the monitoring tests
# (Debian's packages; this machine runs as root).
browser: ## Chromium, chromedriver and Prometheus for the tests (apt-get, as root)
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; }
	@# Prometheus and promtool for the monitoring tests (a server the tests start on loopback;
	@# the package's own service is not started: policy-rc.d, or no init system, forbids it).
	@command -v prometheus >/dev/null && command -v promtool >/dev/null || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus; }

# iptables for the cluster tier's network partitions (tests/integration/cluster/partitions.py:
# DROP rules on loopback cut a node off, a network namespace of its own a driver; Debian's
# package, as root).
netfilter: ## iptables for the cluster's partition tests (apt-get, as root)
	@command -v iptables >/dev/null || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iptables; }

# A local Airflow (api-server, scheduler, dag-processor) wired to the local stack; prints URL and login.
airflow: stack-up ## a local Airflow on the local stack; prints its URL and login
	STATESTORE_REPORT_DIR=$(abspath $(REPORTS)) scripts/airflow up
airflow-down: ## stop the local Airflow
	scripts/airflow down

# Style, and the import rules between the package's wings (pyproject.toml [tool.importlinter]:
# layers, forbidden imports, no cycles); the plugin's package is found on plugins/. Then the
# manual (mkdocs.yml, docs/): --strict fails on a broken link or anchor; the site goes to site/.
lint: venv ## ruff, the import rules, the strict docs build, every test module imports
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	PYTHONPATH=plugins $(BIN)/lint-imports --no-cache
	$(BIN)/mkdocs build --strict --quiet --site-dir site
	$(BIN)/pytest --collect-only -q -p no:cacheprovider tests > /dev/null

clean: ## stop the stack, delete its data, logs and checkpoints
	scripts/stack down || true
	rm -rf .stack/data .stack/logs .stack/checkpoints
