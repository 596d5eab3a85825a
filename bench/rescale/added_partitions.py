"""Phase `added` of the rescale benchmark, on the single-node stack with Spark local[2] in this
process: partitions added to the topic under a running stream (our job, a 1 s trigger).

The fill (N distinct keys) is counted first; then, `rounds` times, the topic gets `step` more
partitions and lines of existing keys are produced into each new one at once. Timed per round:
from the moment the new partitions exist (Kafka's CreatePartitions answered) until the first
batch that read a new partition had committed (`to_first_counted_s`), and until that batch began
(`to_batch_start_s`: Spark finding the partitions, at its next trigger). Nothing restarts: the
query's run id is checked to be the same at the end, and every count against the truth.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from collections import Counter
from datetime import datetime

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions
from executors import fill_line


def _epoch_s(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def _read(raw, topic: str) -> dict[int, int]:
    parsed = json.loads(raw) if isinstance(raw, str) else (raw or {})
    return {int(p): int(o) for p, o in parsed.get(topic, {}).items()}


def first_batch_reading(events: list[dict], topic: str, partition: int) -> dict | None:
    """The progress event of the first batch that read records of `partition`."""
    for event in sorted(events, key=lambda e: e["batchId"]):
        source = event["sources"][0]
        if _read(source["endOffset"], topic).get(partition, 0) > _read(source["startOffset"], topic).get(partition, 0):
            return event
    return None


def _produce_to(bootstrap: str, topic: str, partition: int, lines: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for line in lines:
        producer.produce(topic, value=line, partition=partition)
    if producer.flush(60) != 0:
        raise RuntimeError(f"lines for {topic}[{partition}] not acknowledged")


def _wait(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout_s:.0f} s")
        time.sleep(0.2)


def _first_batch_of(query, topic: str, partition: int) -> dict:
    """Wait for the first batch of `query` that read `partition`; its progress event."""
    deadline = time.monotonic() + 120
    while True:
        found = first_batch_reading([json.loads(p.json) for p in query.recentProgress], topic, partition)
        if found is not None:
            return found
        if time.monotonic() > deadline:
            raise RuntimeError(f"no batch read {topic}[{partition}] within 120 s")
        time.sleep(0.2)


def run(spark, cassandra, kafka, workdir, keys: int, rounds: int, step: int, seed: int) -> dict:
    from statestore.conn import kafka as kafka_io
    from statestore.conn.cassandra import session_for
    from statestore.core.config import StreamConfig
    from statestore.store.book import registry
    from statestore.stream.job import JobConfig, start

    tag = uuid.uuid4().hex[:6]
    topic, store = f"bench-added-{tag}", f"added_{tag}"
    kafka_io.ensure_topic(kafka, topic, 4)
    rng = random.Random(seed)
    fill = [fill_line(range(start, min(start + 10, keys))) for start in range(0, keys, 10)]
    truth = Counter(word.decode() for line in fill for word in line.split())
    kafka_io.produce(kafka, topic, iter(fill))
    session = session_for(cassandra)

    def caught_up() -> bool:
        progress = registry.progress(session, cassandra.keyspace, store) if started.query.lastProgress else None
        if progress is None or progress.offsets is None:
            return False
        ends = kafka_io.end_offsets(kafka, topic)
        return {int(p): o for p, o in json.loads(progress.offsets)[topic].items()} == dict(ends)

    stream = StreamConfig(topic=topic, store=store, checkpoint=str(workdir / f"added-cp-{tag}"), trigger="1s")
    started = start(spark, JobConfig(stream, cassandra, kafka))
    out: dict = {"keys": keys, "step": step, "trigger": "1s", "rounds": []}
    try:
        _wait(caught_up, 600, "the fill counted")
        run_id, partitions = started.query.runId, 4
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
        for _ in range(rounds):
            added = list(range(partitions, partitions + step))
            admin.create_partitions([NewPartitions(topic, partitions + step)])[topic].result(timeout=60)
            changed = time.time()
            for partition in added:
                lines = [fill_line(rng.randrange(keys) for _ in range(10)) for _ in range(100)]
                _produce_to(kafka.bootstrap_servers, topic, partition, lines)
                truth.update(word.decode() for line in lines for word in line.split())
            produced = time.time()

            first = _first_batch_of(started.query, topic, added[0])
            began = _epoch_s(first["timestamp"])
            out["rounds"].append(
                {
                    "partitions": f"{partitions} -> {partitions + step}",
                    "to_first_counted_s": round(began + first["durationMs"]["triggerExecution"] / 1000 - changed, 3),
                    "to_batch_start_s": round(began - changed, 3),
                    "produce_s": round(produced - changed, 3),
                    "batch_id": first["batchId"],
                }
            )
            partitions += step
            _wait(caught_up, 300, "the new partitions counted")
        out["same_run"] = started.query.isActive and started.query.runId == run_id
    finally:
        started.stop()
    from executors import _counts

    out["exact"] = _counts(session, cassandra.keyspace, store) == dict(truth)
    from bench_common import delete_topics

    delete_topics(kafka, [topic])
    return out
