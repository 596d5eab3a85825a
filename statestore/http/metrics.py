"""GET /metrics: every store's stream in Prometheus' text format (prometheus-client).

Gathered at scrape time from what outlives the driver (statestore.store.book.status: the registry,
the lease, the stream log, Kafka's end offsets), cached for `ttl_s` so a burst of scrapes costs
one round of queries: off the event loop (other requests go on meanwhile), several stores at a
time, and Kafka asked once for the end offsets of every store's topic. Counters carry on across
drivers: they come from the running sums each batch row keeps
(statestore.store.book.stream_log.Totals). The API's own request latency is a histogram
observed by a middleware, per route template, method and status.

Kafka is optional: without settings or when it does not answer, the lag series are left out
and statestore_kafka_up is 0; every other series is still served.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from cassandra import InvalidRequest
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from statestore.conn.kafka import end_offsets_of_topics
from statestore.core.config import KafkaConfig
from statestore.core.errors import KafkaError, StateStoreError
from statestore.http.answers import DRIVER_ERRORS
from statestore.http.paths import app_path
from statestore.store import admin
from statestore.store.book import stream_log
from statestore.store.book.status import StreamStatus, stream_status
from statestore.store.builder import open_session_store, open_store, open_window_store

_log = logging.getLogger(__name__)
KAFKA_RETRY_S = 60.0  # after Kafka failed to answer, gather without it this long (its timeout is 15 s)
_GATHER_THREADS = 8  # stores whose figures are read at once (the driver's session is shared)
KafkaSource = KafkaConfig | Callable[[], KafkaConfig | None] | None
# prometheus-client's own variable: read when the package is imported, so set before that.
MULTIPROCESS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"
_CONVERTER = re.compile(r":\w+}")


def entries_estimate(session, spec) -> int | None:
    """The store's own estimate of its entries (None when it cannot tell, e.g. its table is
    gone: one such store must not cost the whole scrape)."""
    try:
        if spec.store_type.windowed:
            store = open_window_store(session, spec.keyspace, spec.name)
        elif spec.store_type.sessioned:
            store = open_session_store(session, spec.keyspace, spec.name)
        else:
            store = open_store(session, spec.keyspace, spec.name)
        return store.approximate_num_entries()
    except (StateStoreError, InvalidRequest, *DRIVER_ERRORS) as exc:  # InvalidRequest: a table dropped by hand
        _log.warning("metrics: no entries estimate for store %s: %s", spec.name, exc)
        return None


class StoreCollector:
    """A prometheus-client collector over every store of the catalog's keyspace."""

    def __init__(self, catalog, kafka: KafkaSource = None, ttl_s: float = 5.0) -> None:
        self.catalog = catalog
        self.kafka = kafka
        self.ttl_s = ttl_s
        self._lock = threading.Lock()
        self._cached: tuple[float, list] | None = None
        self._kafka_failed_at: float | None = None

    def _kafka(self) -> KafkaConfig | None:
        if self._kafka_failed_at is not None and time.monotonic() - self._kafka_failed_at < KAFKA_RETRY_S:
            return None
        return self.kafka() if callable(self.kafka) else self.kafka

    def gather(self) -> tuple[list[tuple[StreamStatus, int | None]], bool]:
        """(status and entries estimate of every store, whether Kafka answered); cached."""
        with self._lock:
            if self._cached is not None and time.monotonic() - self._cached[0] < self.ttl_s:
                return self._cached[1]
            session, keyspace = self.catalog.session(), self.catalog.keyspace
            kafka, kafka_up = self._kafka(), True
            listings = admin.list_stores(session, keyspace)
            ends: dict[str, dict[int, int]] = {}
            topics = [s.progress.source_topic for s in listings if s.progress.source_topic]
            if kafka is not None:  # every store's topic in one question, not one per store
                try:
                    ends = end_offsets_of_topics(kafka, topics)
                except KafkaError as exc:
                    _log.warning("metrics: Kafka did not answer (%s); lag left out", exc)
                    kafka, kafka_up, self._kafka_failed_at = None, False, time.monotonic()
            source = None if kafka is None else ends.get  # a topic not found: gone, no lag

            def figures(listing) -> tuple[StreamStatus, int | None]:
                name = listing.spec.name
                return stream_status(session, source, keyspace, name), entries_estimate(session, listing.spec)

            # Each store's figures take several reads one after another: stores side by side.
            with ThreadPoolExecutor(_GATHER_THREADS, thread_name_prefix="statestore-metrics") as pool:
                found = list(pool.map(figures, listings))
            gathered = (found, kafka_up and kafka is not None)
            self._cached = (time.monotonic(), gathered)
            return gathered

    def collect(self):
        stores, kafka_up = self.gather()
        lag = GaugeMetricFamily(
            "statestore_lag_records",
            "Records in Kafka the store has not applied",
            labels=["store", "topic", "partition"],
        )
        batches = CounterMetricFamily("statestore_batches", "Batches the store's streams applied", labels=["store"])
        durations = SummaryMetricFamily(
            "statestore_batch_duration_seconds", "Durations of the recent batches (the last 20)", labels=["store"]
        )
        written = CounterMetricFamily("statestore_rows_written", "Rows the stream wrote", labels=["store"])
        skipped = CounterMetricFamily(
            "statestore_rows_skipped", "Keys a replayed batch found already applied", labels=["store"]
        )
        letters = CounterMetricFamily(
            "statestore_dead_letters", "Input the stream could not count", labels=["store", "reason"]
        )
        last = GaugeMetricFamily(
            "statestore_last_batch_timestamp_seconds", "When the last batch was recorded", labels=["store"]
        )
        entries = GaugeMetricFamily("statestore_entries_estimate", "Entries, as the store estimates", labels=["store"])
        state = GaugeMetricFamily(
            "statestore_stream_state", "1 for the stream's latest recorded state", labels=["store", "state"]
        )
        writer = GaugeMetricFamily("statestore_writer_up", "1 while a driver holds the store's lease", labels=["store"])
        restart = GaugeMetricFamily(
            "statestore_restart_seconds", "The last run's time from start to first committed batch", labels=["store"]
        )
        for status, estimate in stores:
            name = status.store
            for p in status.lag:
                lag.add_metric([name, p.topic, str(p.partition)], p.lag)
            batches.add_metric([name], 0 if status.last_batch_id is None else status.last_batch_id + 1)
            durations.add_metric([name], len(status.batch_seconds), sum(status.batch_seconds))
            written.add_metric([name], status.totals.written)
            skipped.add_metric([name], status.totals.skipped)
            for reason, count in status.totals.dead_letters:
                letters.add_metric([name, reason], count)
            if status.last_batch_at_ms is not None:
                last.add_metric([name], status.last_batch_at_ms / 1000)
            if estimate is not None:
                entries.add_metric([name], estimate)
            for known in stream_log.STATES:
                state.add_metric([name, known], 1.0 if status.state == known else 0.0)
            writer.add_metric([name], 1.0 if status.writer_up else 0.0)
            if status.last_restart_s is not None:
                restart.add_metric([name], status.last_restart_s)
        up = GaugeMetricFamily("statestore_kafka_up", "1 when Kafka answered the last gathering")
        up.add_metric([], 1.0 if kafka_up else 0.0)
        yield from (lag, batches, durations, written, skipped, letters, last, entries, state, writer, restart, up)


class Metrics:
    """The app's registry: the store collector, the request-latency histogram and the count of
    shed requests.

    Under `statestore serve --workers N` each scrape reaches one worker, so the request series
    are shared: prometheus-client's multiprocess mode (the directory in PROMETHEUS_MULTIPROC_DIR,
    which serve sets for its workers) keeps every worker's values in files there, and a scrape
    sums them, so the counts are the whole server's and keep growing when a worker is replaced."""

    def __init__(self, catalog, kafka: KafkaSource = None, ttl_s: float = 5.0) -> None:
        self.stores = StoreCollector(catalog, kafka, ttl_s)
        self.shared_dir = os.environ.get(MULTIPROCESS_DIR_ENV)
        # Shared: the series live in the directory's files and every scrape gathers them anew.
        self.registry = None if self.shared_dir else CollectorRegistry()
        if self.registry is not None:
            self.registry.register(self.stores)
        self.requests = Histogram(
            "statestore_http_request_duration_seconds",
            "Latency of the HTTP API's requests, by route template, method and status",
            ["route", "method", "status"],
            registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
        )
        self.shed = Counter(
            "statestore_http_requests_shed",
            "Requests answered 503 at once because every slot was busy and the queue full",
            registry=self.registry,
        )

    def _gathered(self) -> CollectorRegistry:
        if self.registry is not None:
            return self.registry
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=self.shared_dir)
        registry.register(self.stores)
        return registry

    def answer(self) -> Response:
        try:
            body = generate_latest(self._gathered())
        except (StateStoreError, *DRIVER_ERRORS) as exc:  # Cassandra down: say so, as the other routes do
            return Response(f"# statestore metrics unavailable: {exc}\n", status_code=503, media_type="text/plain")
        return Response(body, media_type=CONTENT_TYPE_LATEST)


class RequestTimer:
    """ASGI middleware: every HTTP request's latency into Metrics.requests, by route template
    (the path's own text would make a series per key)."""

    def __init__(self, app, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began = time.perf_counter()
        status = {"code": 500}

        async def sending(message):
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = scope.get("route")
            routed = getattr(route, "path", None)
            # "{key:path}" -> "{key}": one series per route whether the fast path or FastAPI answered.
            template = _CONVERTER.sub("}", routed) if routed else _template_of(scope)
            self.metrics.requests.labels(template, scope.get("method", "GET"), str(status["code"])).observe(
                time.perf_counter() - began
            )


def _template_of(scope) -> str:
    """Requests answered before routing (the point-get fast path) or not routed at all."""
    path = app_path(scope)
    parts = path.strip("/").split("/")
    if len(parts) == 4 and parts[0] == "stores" and parts[2] == "keys":
        return "/stores/{store}/keys/{key}"
    return path if path in ("/metrics", "/stores", "/health") else "other"


async def metrics_route(request: Request) -> Response:
    # In a worker thread: gathering reads every store (seconds for hundreds of them), which on
    # the event loop would hold every other request of the worker for as long.
    return await run_in_threadpool(request.app.state.metrics.answer)


__all__ = ["Metrics", "RequestTimer", "StoreCollector", "metrics_route"]
