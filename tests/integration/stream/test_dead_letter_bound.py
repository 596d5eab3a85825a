"""The driver holds at most a bound in bytes of a batch's dead letters (dead_letters.fetch_groups),
however they are spread: Spark's partitions, cut by rows, gave one of 2.7 MiB under a 2 MiB bound
when the large records fell on every fifth offset. And a batch whose dead letters exceed the bound
many times is still written whole, through the seam the stream calls."""

from __future__ import annotations

import datetime as dt
from functools import partial

from statestore.store.book import deadletters
from statestore.stream import dead_letters, job
from statestore.stream.dead_letters import fetch_groups
from statestore.stream.transforms import dead_letter_rows
from statestore.stream.writer import BatchSeams
from tests.integration import conftest
from tests.integration.conftest import dump, produce_lines, run_stream

KIB = 1024


def _held(group) -> int:
    return sum(len(r.raw or b"") + len((r.detail or "").encode()) for r in group)


def test_each_fetch_holds_at_most_the_bound_whatever_the_spread(spark):
    at = dt.datetime(2026, 11, 23, 12)
    # Per Kafka partition: a 300 KiB bad record at every fifth offset among 1-byte ones, and one
    # record over half the bound (it comes alone).
    values = [b"\xff" * (300 * KIB) if i % 5 == 0 else b"\xff" for i in range(50)] + [b"\xfe" * (1_500 * KIB)]
    rows = [("t", p, o, at, v) for p in (0, 1) for o, v in enumerate(values)]
    records = spark.createDataFrame(
        rows, "topic string, partition int, offset long, timestamp timestamp, value binary"
    ).coalesce(1)
    bound = 2 * 1024 * KIB
    groups = list(fetch_groups(dead_letter_rows(records), fetch_bytes=bound, fetch_rows=40))
    assert sorted((r.partition, r.offset) for g in groups for r in g) == sorted((p, o) for _, p, o, *_ in rows)
    assert all(_held(g) <= bound or len(g) == 1 for g in groups), [(_held(g), len(g)) for g in groups]
    assert max(len(g) for g in groups) <= 40
    assert sum(len(g) == 1 and _held(g) > bound // 2 for g in groups) == 2  # the two large ones, alone
    assert len(groups) <= -(-sum(map(_held, groups)) // (bound // 2)) + -(-len(rows) // 20) + 4  # few fetches


def test_a_batch_whose_dead_letters_exceed_the_bound_is_written_whole_one_bound_at_a_time(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path, monkeypatch
):
    bound = 256 * KIB
    bad = [bytes([0xFF]) + bytes([i]) * (40 * KIB) for i in range(20)]  # 800 KiB of invalid UTF-8
    produce_lines(kafka_config, topic, [b"alpha beta", *bad, b"beta"])
    groups, chunks = [], []

    def measured_fetch(*args, **kwargs):
        for group in fetch_groups(*args, **kwargs):
            groups.append((_held(group), len(group)))
            yield group

    def measured_write(session, keyspace, store, chunk, write_ts=None):
        chunks.append(sum(len(d.raw or b"") + len(d.detail or "") for d in chunk))
        deadletters.write(session, keyspace, store, chunk, write_ts=write_ts)

    def step(session, batch_df, spec, batch_id, **late):  # what the stream calls, with a small bound
        return dead_letters.write_dead_letters(
            session, batch_df, spec, batch_id, **late, fetch_bytes=bound, write=measured_write
        )

    monkeypatch.setattr(dead_letters, "fetch_groups", measured_fetch)
    monkeypatch.setattr(conftest, "start", partial(job.start, seams=BatchSeams(dead_letters=step)))
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp")

    letters = list(deadletters.read_all(session, keyspace, store_name))
    assert sorted(d.raw for d in letters) == sorted(bad)  # every one, whole
    assert dump(session, keyspace, store_name) == {"alpha": 1, "beta": 2}
    assert sum(n for _, n in groups) == len(bad) and len(groups) >= 4
    assert max(held for held, _ in groups) <= bound and max(chunks) <= bound
