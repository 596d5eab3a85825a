"""A session change whose write times out has an unknown outcome for a while. When a change
across segments was one LOGGED batch (until issue 45 item 3), a WriteTimeout of write type
BATCH meant the batch log held it and Cassandra would apply all of it, and a read in between
could see part of it: the replaced sessions deleted, the merged one not yet written. So a retry
does not read and plan again; it re-sends the identical change, the same statements at the same
write timestamp, which is idempotent whatever lands first (issue 28, item 2). The store here is
an in-memory model of that window of partial state. (Since issue 45 item 3 no read can see
that state, and a plan over a half-written change completes it:
tests/unit/stream/test_session_partial_merge.py; the re-send rule stays.)"""

from __future__ import annotations

from cassandra import ConsistencyLevel, WriteTimeout, WriteType

from statestore.core.codecs import decode_long, encode_long
from statestore.core.config import CassandraConfig
from statestore.core.model import SessionEntry, StoreSpec, StoreType
from statestore.core.windows import SessionSpec
from statestore.stream import apply as apply_module
from statestore.stream import apply_sessions

GAP = 1_000
SPEC = StoreSpec("ks", "sessions", StoreType.PARTITIONED_SESSION, 1, windowing=SessionSpec(GAP, 0, None))
KEY = b"heron"


class BatchLogStore:
    """Sessions by (key, start, end). The first write of a multi-session change times out
    after only its deletes reached the replicas read; the batch log applies the rest later."""

    def __init__(self, sessions: list[SessionEntry]) -> None:
        self.rows = {(e.key, e.start_ms, e.end_ms): e for e in sessions}
        self.batch_log: list = []
        self.timeouts = 1
        self.sent: list = []

    def segments(self, session) -> list[int]:
        return [0]

    def find_many(self, session, asks, segments, concurrency):
        return {
            key: [e for e in self.rows.values() if e.key == key and e.end_ms >= end and e.start_ms <= start]
            for key, end, start in asks
        }

    def apply(self, session, changes, concurrency, write_ts) -> None:
        self.sent.append((tuple(changes), write_ts))
        if self.timeouts:
            self.timeouts -= 1
            for change in changes:
                for e in change.deletes:
                    self.rows.pop((e.key, e.start_ms, e.end_ms), None)
            self.batch_log.extend(changes)
            raise WriteTimeout(
                "timed out",
                consistency=ConsistencyLevel.LOCAL_QUORUM,
                required_responses=2,
                received_responses=1,
                write_type=WriteType.BATCH,
            )
        self._apply(changes)

    def land_batch_log(self) -> None:
        self._apply(self.batch_log)
        self.batch_log = []

    def _apply(self, changes) -> None:
        for change in changes:
            for e in change.deletes:
                self.rows.pop((e.key, e.start_ms, e.end_ms), None)
            for e in change.writes:
                self.rows[(e.key, e.start_ms, e.end_ms)] = e


def test_a_timed_out_logged_session_batch_is_resent_unchanged_not_merged_again(monkeypatch):
    # Two sessions 3 s apart; the batch's event at 2 s bridges them into one of 2 + 3 + 1 events.
    store = BatchLogStore(
        [
            SessionEntry(KEY, 0, 1_000, encode_long(2), 1, 1_000),
            SessionEntry(KEY, 3_000, 4_000, encode_long(3), 1, 4_000),
        ]
    )
    monkeypatch.setattr(apply_sessions, "session_table_for", lambda spec: store)
    monkeypatch.setattr(apply_module, "session_for", lambda config: None)
    monkeypatch.setattr(apply_sessions, "session_for", lambda config: None, raising=False)
    monkeypatch.setattr("time.sleep", lambda s: None)
    applier = apply_sessions.session_applier(CassandraConfig(retry_budget_s=30), SPEC, 2, 555)

    stats = sum(applier(iter([("heron", 1, 2_000, [2_000])])), apply_module.ApplyStats())
    store.land_batch_log()

    assert stats.written == 1
    sessions = sorted((e.start_ms, e.end_ms, decode_long(e.value)) for e in store.rows.values())
    assert sessions == [(0, 4_000, 6)]
    # The retry re-sent the very change and timestamp of the first attempt.
    assert len(store.sent) == 2 and store.sent[0] == store.sent[1]


def test_the_retry_rule_plans_once_and_resends_the_same_plan():
    plans, writes, failures = [], [], [WriteTimeout("t", write_type=WriteType.BATCH)]

    def plan():
        plans.append(object())
        return plans[-1]

    def write(planned):
        writes.append(planned)
        if failures:
            raise failures.pop()

    def retry(action):
        while True:
            try:
                return action()
            except WriteTimeout:
                continue

    planned = apply_sessions.planned_then_written(plan, write, retry)
    assert len(plans) == 1 and writes == [planned, planned]
