"""Recovery paths a crash or an operator's mistake leads to: --recover-from-store finishing a
half-written batch, a checkpoint restored from an older copy (rolled back), and a writer whose
lease is taken from it while it runs, and a half-written batch replayed under other settings."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections import Counter

import pytest
from pyspark.errors import StreamingQueryException

from statestore.conn import kafka as kafka_io
from statestore.core.config import StreamConfig
from statestore.core.errors import CheckpointMismatchError, StoreTableLostError
from statestore.core.event_time import TimedValue
from statestore.store import admin
from statestore.store.book import deadletters, registry
from statestore.store.book.lease import LEASE_TABLE
from statestore.store.provision import table_exists
from statestore.stream.checkpoint import initial_offsets
from statestore.stream.faults import ENV as FAULT_ENV
from statestore.stream.job import JobConfig, start
from tests.corpus import generate
from tests.integration.conftest import (
    dump,
    produce_lines,
    run_stream,
    spark_submit_job,
    wait_for,
    wait_for_lease_to_lapse,
)


def _crashed_mid_write(keyspace, topic, store_name, checkpoint, batch: int, *limit: str) -> None:
    """The job (spark-submit, lease TTL 5 s) killed half-way through batch `batch`'s writes;
    `limit`: more job arguments (e.g. --max-offsets-per-trigger N)."""
    crashed = spark_submit_job(
        *("--topic", topic, "--store", store_name, "--checkpoint", str(checkpoint), "--keyspace", keyspace),
        *limit,
        *("--lease-ttl", "5"),
        env={FAULT_ENV: f"kill-mid-write:{batch}"},
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    assert crashed.wait(timeout=600) != 0


@pytest.mark.parametrize("crashed_batch", [1, 0])
def test_recover_from_store_finishes_a_half_written_batch(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path, crashed_batch
):
    lines, truth = generate(3_000, seed=1901)
    produce_lines(kafka_config, topic, lines)
    lost = tmp_path / "lost-cp"
    _crashed_mid_write(keyspace, topic, store_name, lost, crashed_batch, "--max-offsets-per-trigger", "1000")
    half = registry.progress(session, keyspace, store_name)
    last = crashed_batch - 1 if crashed_batch else None
    assert (half.last_batch_id, half.pending_batch_id) == (last, crashed_batch), "the crash left no half-written batch"
    if crashed_batch == 0:
        # The store's very first batch starts where Spark's Kafka source resolved its starting
        # offsets, which the checkpoint keeps: the recovery below reads from there.
        assert half.offsets == initial_offsets(spark, str(lost)).as_json()
        assert json.loads(half.offsets) == {topic: {str(p): 0 for p in range(len(json.loads(half.offsets)[topic]))}}
    partial = dump(session, keyspace, store_name)
    assert partial != dict(truth)
    # The checkpoint is lost with the machine: a new one continues from the store's position,
    # finishing batch 1 from its recorded offsets first, then reading the rest.
    shutil.rmtree(lost)
    wait_for_lease_to_lapse(session, keyspace, store_name, whose="the crashed writer's")
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "new-cp", recover_from_store=True)
    done = registry.progress(session, keyspace, store_name)
    assert done.last_batch_id >= crashed_batch + 1 and done.pending_batch_id in (None, done.last_batch_id)
    assert dump(session, keyspace, store_name) == dict(truth)


def _forget_batch_files(checkpoint, log: str, batch: int) -> None:
    """Remove one batch's file (and Hadoop's checksum beside it) from the checkpoint's `log`
    (offsets or commits): what a copy taken before Spark wrote it lacks."""
    for name in (str(batch), f".{batch}.crc"):
        (checkpoint / log / name).unlink(missing_ok=True)


def test_a_checkpoint_restored_between_a_batchs_offsets_and_commit_while_the_next_was_half_written(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    """Issue 45, item 1, on the real stack: the job killed half-way through batch 2's writes, its
    checkpoint restored from a copy holding offsets/0-1 and commits/0, a restart with another
    --max-offsets-per-trigger. Spark runs batch 1 again (recorded as done: nothing applied, and
    batch 2's pending record kept), then plans batch 2 over other input: refused, nothing written;
    the way out the refusal names (--recover-from-store) ends exact. Before the fix the rerun of
    batch 1 overwrote batch 2's record, the new plan of batch 2 was accepted and the keys the
    first attempt wrote were skipped: exit 0, wrong counts."""
    lines, truth = generate(3_000, seed=1930)
    produce_lines(kafka_config, topic, lines)
    checkpoint = tmp_path / "cp"
    _crashed_mid_write(keyspace, topic, store_name, checkpoint, 2, "--max-offsets-per-trigger", "1000")
    half = registry.progress(session, keyspace, store_name)
    assert (half.last_batch_id, half.pending_batch_id) == (1, 2), "the crash left no half-written batch 2"
    _forget_batch_files(checkpoint, "offsets", 2)
    _forget_batch_files(checkpoint, "commits", 1)
    wait_for_lease_to_lapse(session, keyspace, store_name, ttl_s=5, whose="the crashed writer's")
    with pytest.raises((CheckpointMismatchError, RuntimeError), match=r"the store's batch 2 ends at"):
        run_stream(spark, cassandra_config, kafka_config, topic, store_name, checkpoint, max_offsets_per_trigger=700)
    kept = registry.progress(session, keyspace, store_name)
    assert (kept.last_batch_id, kept.pending_batch_id, kept.pending_offsets, kept.pending_ts) == (
        1,
        2,
        half.pending_offsets,
        half.pending_ts,
    ), "the rerun of batch 1 overwrote the record of the half-written batch 2"
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "new", recover_from_store=True)
    assert dump(session, keyspace, store_name) == dict(truth)


def test_a_store_whose_table_was_dropped_is_refused_and_a_reset_starts_it_over(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    """Issue 45, item 2: a store's table gone while its registry keeps its progress (dropped by
    hand here; an interrupted drop or a re-layout's clean-up do the same). The job used to create
    it again empty and count on from the recorded offsets: exit 0, every earlier count gone. Now
    it is refused before anything is written, and the way out it names, a reset, starts over."""
    lines, truth = generate(300, seed=1940)
    produce_lines(kafka_config, topic, lines)
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp")
    table = registry.lookup(session, keyspace, store_name).table
    session.execute(f"DROP TABLE {keyspace}.{table}")
    more, extra = generate(100, seed=1941)
    produce_lines(kafka_config, topic, more)
    recorded = registry.progress(session, keyspace, store_name)
    with pytest.raises(StoreTableLostError, match=r"is gone, but the registry records its batches up to 0"):
        run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp")
    assert not table_exists(session, keyspace, table), "the refused job created the table again"
    after = registry.progress(session, keyspace, store_name)
    assert (after.last_batch_id, after.offsets, after.pending_batch_id) == (
        recorded.last_batch_id,
        recorded.offsets,
        recorded.pending_batch_id,
    )
    admin.truncate_store(session, keyspace, store_name, verb="resetting")
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "fresh")
    assert dump(session, keyspace, store_name) == dict(truth + extra)


def test_a_rolled_back_checkpoint_is_refused(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    checkpoint, older = tmp_path / "cp", tmp_path / "cp-copy"
    total = None
    for round_ in range(3):  # three runs: batches 0, 1 and 2; a copy taken after the first
        lines, truth = generate(200, seed=1910 + round_)
        produce_lines(kafka_config, topic, lines)
        run_stream(spark, cassandra_config, kafka_config, topic, store_name, checkpoint)
        total = truth if total is None else total + truth
        if round_ == 0:
            shutil.copytree(checkpoint, older)
    assert registry.progress(session, keyspace, store_name).last_batch_id == 2
    # The copy restored: same query, but batch ids the store is already past.
    shutil.rmtree(checkpoint)
    shutil.copytree(older, checkpoint)
    more, _ = generate(100, seed=1919)
    produce_lines(kafka_config, topic, more)
    with pytest.raises((CheckpointMismatchError, RuntimeError), match="rolled back"):
        run_stream(spark, cassandra_config, kafka_config, topic, store_name, checkpoint)
    assert dump(session, keyspace, store_name) == dict(total)
    assert registry.progress(session, keyspace, store_name).last_batch_id == 2


def test_a_writer_that_loses_its_lease_mid_run_stops_before_writing_more(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    lines, truth = generate(300, seed=1920)
    produce_lines(kafka_config, topic, lines)
    stream = StreamConfig(topic=topic, store=store_name, checkpoint=str(tmp_path / "cp"), trigger="1s", lease_ttl_s=6)
    running = start(spark, JobConfig(stream, cassandra_config, kafka_config))
    try:

        def counted_and_recorded() -> bool:
            # The counts land before the batch is recorded: wait for both, or `recorded` below
            # could be read in between and the record of this very batch taken for a new one.
            progress = registry.progress(session, keyspace, store_name)
            settled = progress.last_batch_id is not None and progress.pending_batch_id == progress.last_batch_id
            return settled and dump(session, keyspace, store_name) == dict(truth)

        wait_for(counted_and_recorded, 120, "the first input counted and its batch recorded")
        # Someone else holds the store now (an operator's mistake, or a split brain).
        session.execute(f"UPDATE {keyspace}.{LEASE_TABLE} SET holder = 'intruder' WHERE store = %s", (store_name,))
        recorded = registry.progress(session, keyspace, store_name).last_batch_id
        time.sleep(5)  # the holder's next renewal (every 2 s) finds the lease gone
        more, _ = generate(100, seed=1921)
        produce_lines(kafka_config, topic, more)
        with pytest.raises(StreamingQueryException, match="LeaseLostError"):
            running.query.awaitTermination(timeout=120)
    finally:
        running.stop()
    # Nothing more was recorded or counted by the writer that lost the lease.
    assert registry.progress(session, keyspace, store_name).last_batch_id == recorded
    assert dump(session, keyspace, store_name) == dict(truth)


def test_a_half_written_batch_replayed_under_another_max_future_counts_as_it_began(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    """Issue 45, item 5, on the real stack: records 20 minutes ahead of the clock are dead
    letters `future` under the default --max-future (5m); the job is killed half-way through
    the batch's writes and restarted on its checkpoint with --max-future 30m. The replay keeps
    the rules the batch began under (registry `pending_rules`): the on-time words counted once,
    the records ahead dead letters, nothing lost. Before the fix the replay counted the records
    ahead in the keys the first attempt had not written yet, and dead-lettered none of them."""
    now = int(time.time() * 1000)
    on_time = [(now - 60_000 + i, f"weir heron w{i % 40}") for i in range(400)]
    ahead = [(now + 20 * 60_000 + i, f"weir ahead{i % 40}") for i in range(100)]
    kafka_io.produce(kafka_config, topic, [TimedValue(text.encode(), t) for t, text in on_time + ahead])
    checkpoint = tmp_path / "cp"
    _crashed_mid_write(keyspace, topic, store_name, checkpoint, 0)
    half = registry.progress(session, keyspace, store_name)
    assert (half.last_batch_id, half.pending_batch_id) == (None, 0), "the crash left no half-written batch 0"
    assert half.pending_rules == registry.BatchRules(max_future_ms=5 * 60_000, retention_ms=None)
    wait_for_lease_to_lapse(session, keyspace, store_name, ttl_s=5, whose="the crashed writer's")
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, checkpoint, max_future_ms=30 * 60_000)
    assert dump(session, keyspace, store_name) == Counter(w for _, text in on_time for w in text.split())
    letters = deadletters.read_all(session, keyspace, store_name)
    assert sorted((d.reason, d.kafka_timestamp_ms) for d in letters) == [(deadletters.FUTURE, t) for t, _ in ahead]
