"""The stream log on the real Cassandra: batch rows with running sums, the newest batch at or
before an id, and `stream_status`'s dead letters of the last hour from two rows' sums (found
by bisecting batch ids), equal to a count over the rows themselves."""

from __future__ import annotations

import time

from statestore.store import stream_log
from statestore.store.builder import StoreBuilder
from statestore.store.status import HOUR_MS, stream_status
from statestore.store.stream_log import BatchRecord
from statestore.stream.monitor import StreamMonitor

DEAD = [3, 0, 7, 1, 0, 4, 9, 2, 0, 5, 6, 1]


def test_dead_letters_of_the_last_hour_come_from_the_running_sums(session, keyspace, cassandra_config):
    store = StoreBuilder(session, "logged_letters").with_keyspace(keyspace).partitioned_key_value_store(2).create()
    monitor = StreamMonitor(cassandra_config, store.spec)
    monitor.ensure_tables()
    for batch_id, dead in enumerate(DEAD):
        reasons = (("invalid-utf8", dead),) if dead else ()
        monitor.batch(BatchRecord(batch_id, batch_id, "run", None, 10, 10, 0, 40, dead, 0.1, None, None, reasons))
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
