"""/metrics' families from store statuses (gathering stubbed: the real one is an integration
test): names, types and labels as docs/monitoring.md lists them, counters from the running sums."""

import time

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from statestore.http.metrics import StoreCollector, _template_of
from statestore.store.book.status import PartitionLag, StreamStatus
from statestore.store.book.stream_log import Totals


class Gathered(StoreCollector):
    def __init__(self, stores, kafka_up=True):
        super().__init__(catalog=None)
        self.stores, self.kafka_up = stores, kafka_up

    def gather(self):
        return self.stores, self.kafka_up


def status(name, **changes):
    base = dict(
        store=name, keyspace="ks", store_type="partitioned-kv", state="running", state_since_ms=1, state_reason=None,
        writer="h:1:a", writer_since_ms=1, last_batch_id=9, last_batch_at_ms=1_767_225_600_000, last_batch_age_s=1.0,
        lag=[PartitionLag("t", 0, 15, 10, 5), PartitionLag("t", 1, 3, 3, 0)], lag_total=5, words_per_s=10.0,
        rate_batches=2, dead_letters_last_hour=0, last_restart_s=2.5, last_restart_at_ms=1,
        totals=Totals(100, 7, 400, (("invalid_utf8", 2), ("late", 1))), batch_seconds=(0.5, 1.5),
    )  # fmt: skip
    return StreamStatus(**{**base, **changes})


def scrape(collector) -> dict:
    registry = CollectorRegistry()
    registry.register(collector)
    samples = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def test_every_listed_series_with_its_labels_and_value():
    got = scrape(Gathered([(status("counts"), 1234), (status("idle", writer=None, state="stopped"), None)]))
    assert got[("statestore_lag_records", (("partition", "0"), ("store", "counts"), ("topic", "t")))] == 5
    assert got[("statestore_batches_total", (("store", "counts"),))] == 10
    assert got[("statestore_batch_duration_seconds_count", (("store", "counts"),))] == 2
    assert got[("statestore_batch_duration_seconds_sum", (("store", "counts"),))] == 2.0
    assert got[("statestore_rows_written_total", (("store", "counts"),))] == 100
    assert got[("statestore_rows_skipped_total", (("store", "counts"),))] == 7
    assert got[("statestore_dead_letters_total", (("reason", "late"), ("store", "counts")))] == 1
    assert got[("statestore_last_batch_timestamp_seconds", (("store", "counts"),))] == 1_767_225_600
    assert got[("statestore_entries_estimate", (("store", "counts"),))] == 1234
    assert ("statestore_entries_estimate", (("store", "idle"),)) not in got
    assert got[("statestore_stream_state", (("state", "running"), ("store", "counts")))] == 1
    assert got[("statestore_stream_state", (("state", "stopped"), ("store", "counts")))] == 0
    assert got[("statestore_stream_state", (("state", "stopped"), ("store", "idle")))] == 1
    assert got[("statestore_writer_up", (("store", "counts"),))] == 1
    assert got[("statestore_writer_up", (("store", "idle"),))] == 0
    assert got[("statestore_restart_seconds", (("store", "counts"),))] == 2.5
    assert got[("statestore_kafka_up", ())] == 1


def test_without_kafka_there_is_no_lag_and_kafka_up_says_so():
    got = scrape(Gathered([(status("counts", lag=[], lag_total=None), 1)], kafka_up=False))
    assert not [name for name, _ in got if name == "statestore_lag_records"]
    assert got[("statestore_kafka_up", ())] == 0


def test_requests_are_labelled_by_route_template_not_by_key():
    assert _template_of({"path": "/stores/counts/keys/river"}) == "/stores/{store}/keys/{key}"
    mounted = {"path": "/statestore/api/stores/c/keys/k", "root_path": "/statestore/api"}
    assert _template_of(mounted) == "/stores/{store}/keys/{key}"
    assert _template_of({"path": "/no/such/thing"}) == "other"


def test_a_routed_request_and_a_fast_path_one_share_their_route_label():
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route
    from starlette.testclient import TestClient

    from statestore.http.metrics import Metrics, RequestTimer

    metrics = Metrics(catalog=None, kafka=None)
    routed = Starlette(routes=[Route("/stores/{store}/keys/{key:path}", lambda request: PlainTextResponse("1"))])
    routed.add_middleware(RequestTimer, metrics=metrics)
    with TestClient(routed) as client:
        assert client.get("/stores/counts/keys/a/b").status_code == 200
    labels = {
        sample.labels["route"]
        for family in metrics.requests.collect()
        for sample in family.samples
        if sample.name.endswith("_count")
    }
    assert labels == {_template_of({"path": "/stores/counts/keys/river"})} == {"/stores/{store}/keys/{key}"}


def test_a_slow_gathering_holds_no_other_request():
    """/metrics gathers in a worker thread: a gathering that takes its time (hundreds of stores)
    does not hold the event loop, so a request arriving meanwhile is answered first."""
    import asyncio
    import threading

    import httpx

    from statestore.http import create_app

    app = create_app(kafka=None)
    gathering, finished = threading.Event(), []

    def slow_gather():
        gathering.set()
        time.sleep(1.0)
        finished.append("metrics")
        return [], True

    app.state.metrics.stores.gather = slow_gather

    async def scenario():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
            scrape = asyncio.create_task(client.get("/metrics"))
            while not gathering.is_set():
                await asyncio.sleep(0.01)
            answered = await asyncio.wait_for(client.get("/openapi.json"), 0.8)
            finished.append("openapi")
            assert answered.status_code == 200 and (await scrape).status_code == 200

    asyncio.run(scenario())
    assert finished == ["openapi", "metrics"]
