"""The stream log on the real Cassandra: batch rows with running sums, the newest batch at or
before an id, and `stream_status`'s dead letters of the last hour from two rows' sums (found
by bisecting batch ids), equal to a count over the rows themselves."""

from __future__ import annotations

import time

from statestore.store.book import stream_log
from statestore.store.book.status import HOUR_MS, stream_status
from statestore.store.book.stream_log import BatchRecord
from statestore.store.builder import StoreBuilder
from statestore.stream.monitor import StreamMonitor

DEAD = [3, 0, 7, 1, 0, 4, 9, 2, 0, 5, 6, 1]


def test_dead_letters_of_the_last_hour_come_from_the_running_sums(session, keyspace, cassandra_config):
    store = StoreBuilder(session, "logged_letters").with_keyspace(keyspace).partitioned_key_value_store(2).create()
    monitor = StreamMonitor(cassandra_config, store.spec)
    monitor.ensure_tables()
    for batch_id, dead in enumerate(DEAD):
        reasons = (("invalid-utf8", dead),) if dead else ()
        record = BatchRecord(
            batch_id=batch_id,
            spark_batch_id=batch_id,
            run_id="run",
            keys=10,
            written=10,
            skipped=0,
            words=40,
            dead_letters=dead,
            seconds=0.1,
            end_offsets=None,
            max_event_time_ms=None,
            dead_letter_reasons=reasons,
        )
        monitor.batch(record)
        time.sleep(0.01)  # distinct recording times
    rows = sorted(stream_log.recent_batches(session, keyspace, store.name, 100), key=lambda b: b.batch_id)
    assert [b.batch_id for b in rows] == list(range(len(DEAD)))
    assert [sum(n for _, n in b.totals.dead_letters) for b in rows] == [sum(DEAD[: i + 1]) for i in range(len(DEAD))]
    assert stream_log.batch_at_or_before(session, keyspace, store.name, 5).batch_id == 5
    assert stream_log.batch_at_or_before(session, keyspace, store.name, 10_000).batch_id == len(DEAD) - 1
    assert stream_log.batch_at_or_before(session, keyspace, store.name, -1) is None
    for boundary in range(len(DEAD)):
        # "Now" an hour after batch `boundary` was recorded: that batch and the later ones count.
        now_ms = rows[boundary].recorded_at_ms + HOUR_MS
        status = stream_status(session, None, keyspace, store.name, now_ms=now_ms)
        assert status.dead_letters_last_hour == sum(DEAD[boundary:]), boundary


def test_state_changes_in_one_millisecond_are_all_kept_in_order(session, keyspace):
    """A run refused the lease writes `starting`, `waiting_for_lease` and `failed` within a
    millisecond or two; each must be its own row, in the order written (CI once lost `starting`)."""
    stream_log.ensure_tables(session, keyspace)
    written = [stream_log.STARTING, stream_log.WAITING_FOR_LEASE, stream_log.FAILED] * 5
    for state in written:
        stream_log.record_state(session, keyspace, "quick_changes", state, run_id="run")
    kept = stream_log.recent_states(session, keyspace, "quick_changes", 100)
    assert [s.state for s in reversed(kept)] == written
    assert len({s.at_ms for s in kept}) == len(written)
