"""The apply cache serving window stores on the real stack: a window this executor wrote at the
previous batch is not read again, nothing is trusted across a restart, and the bucket files hold
only the windows still open (statestore.stream.apply_windows)."""

from __future__ import annotations

import os
import random
import struct

import lmdb
import pytest

from statestore.conn import kafka as kafka_io
from statestore.core.event_time import TimedValue
from statestore.store.book import registry
from statestore.store.builder import open_window_store
from statestore.stream.apply_cache import _working_directory
from statestore.stream.writer import EXECUTORS
from tests.integration.conftest import run_batches
from tests.integration.stream.test_windowed_wordcount import BASE_MS, Reference, _records, _stored

MINUTE = 60_000


@pytest.fixture
def topic(ordered_topic):
    """Every batch reads the next records in time order (conftest's ordered_topic)."""
    return ordered_topic


def _produce(kafka_config, topic, records) -> None:
    kafka_io.produce(kafka_config, topic, [TimedValue(text.encode(), t) for t, text in records])


def test_window_batches_of_a_new_store_read_nothing_and_count_exactly(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    """Hopping windows over an hour of time-ordered records, many batches on the executors:
    each batch shares windows with the one before, which the files vouch for (a new store's
    files start complete, and stay trusted batch after batch), so no batch reads a window. The
    same input without the cache reads every window and counts the same."""
    records = sorted(_records(random.Random(4051), 2_400, BASE_MS, BASE_MS + 60 * MINUTE, "w"))
    _produce(kafka_config, topic, records)
    windows = {"window": MINUTE, "hop": 20_000, "grace": 10 * MINUTE}
    run = {"max_offsets_per_trigger": 300, "driver_apply_records": 0, **windows}
    results = run_batches(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp", **run)
    reference = Reference(MINUTE, 20_000, 10 * MINUTE, 86_400_000)
    reference.batch(records)
    assert len(results) >= 8 and {r.applied_on for r in results} == {EXECUTORS}
    assert _stored(session, keyspace, store_name) == reference.counts
    assert [r.stats.read for r in results] == [0] * len(results)
    assert all(r.stats.cache_tokens for r in results)
    # Rows bucketed as Spark partitions the apply's groups: each bucket in exactly one task.
    assert all(len({b for b, _ in r.stats.cache_tokens}) == len(r.stats.cache_tokens) for r in results)

    uncached = run_batches(
        spark, cassandra_config, kafka_config, topic, store_name + "_x", tmp_path / "cp2", apply_cache=False, **run
    )
    assert [r.stats.read for r in uncached] == [r.stats.keys for r in uncached]
    assert _stored(session, keyspace, store_name + "_x") == reference.counts


def test_a_restart_reads_the_windows_it_cached_before(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    """Between runs another program sets a window the files of the first run still hold: the
    new run's first batch trusts no file, reads that window and adds to it, and reads no window
    starting after the stream time (which the stream cannot have written)."""
    windows = {"window": MINUTE, "grace": 10 * MINUTE, "driver_apply_records": 0}
    _produce(kafka_config, topic, [(BASE_MS + 1_000, "river stone")] * 20)
    run_batches(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp", **windows)
    open_window_store(session, keyspace, store_name).put("river", 100, BASE_MS)
    _produce(kafka_config, topic, [(BASE_MS + 2_000, "river"), (BASE_MS + 5 * MINUTE, "river")] * 3)
    results = run_batches(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp", **windows)
    stored = _stored(session, keyspace, store_name)
    assert stored[("river", BASE_MS)] == 103 and stored[("stone", BASE_MS)] == 20
    assert stored[("river", BASE_MS + 5 * MINUTE)] == 3
    assert (results[0].stats.keys, results[0].stats.read) == (2, 1)


def test_the_bucket_files_forget_the_windows_the_stream_time_closed(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    """One-minute windows with ten minutes' grace over an hour and a half of time-ordered
    records: every window's count is exact, and the files hold only windows still open at the
    last batch's stream time (the file of a long stream stays the size of its open windows)."""
    records = sorted(_records(random.Random(4057), 2_700, BASE_MS, BASE_MS + 90 * MINUTE, "f"))
    _produce(kafka_config, topic, records)
    run = {"window": MINUTE, "grace": 10 * MINUTE, "max_offsets_per_trigger": 300, "driver_apply_records": 0}
    results = run_batches(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp", **run)
    # In time order, with a grace wider than the partitions' skew, nothing is late.
    reference = Reference(MINUTE, MINUTE, 10 * MINUTE, 86_400_000)
    reference.batch(records)
    assert len(results) >= 8
    assert _stored(session, keyspace, store_name) == reference.counts

    # A file is pruned when a task opens it: every bucket got rows of the last batch of a
    # hundred windows or more, so no file holds a window closed when that batch started.
    spec = registry.lookup(session, keyspace, store_name)
    last_big = max(i for i, r in enumerate(results) if i > 0 and r.stats.keys >= 100)
    stream_time_then = max(r.stats.max_time_ms for r in results[:last_big])
    first_open = spec.windowing.first_open_start(stream_time_then)
    starts = []
    directory = os.path.join(_working_directory(), "statestore-apply-cache")
    for name in os.listdir(directory):
        if name.startswith(f"{keyspace}.{store_name}-"):
            env = lmdb.open(os.path.join(directory, name), readonly=True, max_dbs=2, lock=False)
            with env.begin() as txn:
                for key, _ in txn.cursor(db=env.open_db(b"entries", txn=txn, create=False)):
                    starts.append(struct.unpack_from(">q", key)[0])
            env.close()
    assert starts and min(starts) >= first_open > BASE_MS + 45 * MINUTE
    assert len(starts) < len(reference.counts) / 2  # the windows of the first 45 minutes are gone
