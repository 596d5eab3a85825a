"""A session merge across Cassandra partitions applied through a cut node on the real cluster,
retried by the stream's own rule (issue 28, item 2; statestore.stream.apply_sessions).

A session store keeps a key's sessions in Cassandra partitions by session end (segments). Here
one key has two sessions, A in segment s and B in segment s + 1, and a batch's event between
them merges both into one A+B, which ends in segment s + 1. In a keyspace with one replica,
A's partition lives on node 1 or 2 and B's on node 3, which is sent no message that carries
B's partition key while the cut lasts (partitions.MessageCut).

Until issue 45 item 3 the merge was one LOGGED batch (delete A, delete B, insert A+B): its
coordinator applied A's part, node 3 never acknowledged B's, a real WriteTimeout of write type
BATCH, and the batch log replayed the rest later. A retry that planned again from what it read
saw A gone and B still there and counted B's events twice once the log replayed (run with that
rule, this test saw [(0, 80000, 6), (40000, 80000, 4)]). Now the merged session is written
first and A and B are deleted only once it is acknowledged (partitioned_session.write_plan), so
no read can see A gone without A+B; the retry runs as the stream runs it
(statestore.stream.apply_sessions.session_applier: the project's session and with_retries)
while the cut lasts and after it heals. The key must end with one session A+B counting each
event once, and no batch log entry left."""

from __future__ import annotations

import struct
import threading
import time
import uuid

import pytest
from cassandra import ConsistencyLevel, WriteTimeout

from statestore.conn.cassandra import DDL_PROFILE, session_for
from statestore.core import config as cfg
from statestore.core.codecs import decode_long, encode_long
from statestore.core.config import CassandraConfig
from statestore.core.model import SessionEntry, StoreSpec, StoreType
from statestore.core.windows import SessionSpec
from statestore.store.tables.partitioned_session import PartitionedSessionTable, SessionChange
from statestore.stream import apply as apply_module
from statestore.stream import apply_sessions
from tests.integration.cluster import partitions
from tests.integration.cluster.conftest import node_session, wait_until

pytestmark = pytest.mark.skipif(partitions.unavailable() is not None, reason=str(partitions.unavailable()))

SEGMENT, GAP = 60_000, 40_000
CUT_S = 5  # longer than the nodes' write timeout (2 s): the stalled mutation expires unapplied
CUT_NODE = "127.0.0.3"


def _partition_key(partition: int, segment: int) -> bytes:
    """The bytes of a (partition int, segment bigint) partition key, as Cassandra sends them."""
    parts = (struct.pack(">i", partition), struct.pack(">q", segment))
    return b"".join(struct.pack(">H", len(part)) + part + b"\x00" for part in parts)


class CutOnFirstWrite(PartitionedSessionTable):
    """The store's own table; its first write starts the cut (healed CUT_S later by a timer),
    and every write's error is kept, to show what Cassandra answered."""

    def __init__(self, spec: StoreSpec, cut: partitions.MessageCut) -> None:
        super().__init__(spec)
        self.cut = cut
        self.writes = 0
        self.errors: list[Exception] = []

    def apply(self, session, changes, concurrency, write_ts) -> None:
        self.writes += 1
        if self.writes == 1:
            self.cut.start()
            threading.Timer(CUT_S, self.cut.heal).start()
        try:
            super().apply(session, changes, concurrency, write_ts)
        except Exception as exc:
            self.errors.append(exc)
            raise


@pytest.fixture
def netcut(restore_cluster):
    partitions.install()
    try:
        yield partitions
    finally:
        partitions.clear()


@pytest.fixture
def one_replica(cluster_env):
    """A keyspace with one replica of each partition, and a session for it."""
    name = f"itb_{uuid.uuid4().hex[:10]}"
    config = cfg.resolve(CassandraConfig, env=cluster_env, overrides={"keyspace": name, "retry_budget_s": 120})
    session = session_for(config)
    session.execute(
        f"CREATE KEYSPACE {name} WITH replication = {{'class': 'NetworkTopologyStrategy', 'dc1': 1}}",
        execution_profile=DDL_PROFILE,
    )
    yield config, session
    session.execute(f"DROP KEYSPACE IF EXISTS {name}", execution_profile=DDL_PROFILE, timeout=120)


def _split_homes(session, spec: StoreSpec) -> tuple[int, int]:
    """(store partition, segment s) whose segment s lives off node 3 and s + 1 on node 3."""
    metadata = session.cluster.metadata

    def on(partition: int, segment: int) -> str:
        return metadata.get_replicas(spec.keyspace, _partition_key(partition, segment))[0].address

    for segment in range(200):
        for partition in range(spec.partitions):
            if on(partition, segment) != CUT_NODE and on(partition, segment + 1) == CUT_NODE:
                return partition, segment
    raise AssertionError("no two neighbouring segments split between node 3 and the others")


def _batch_log_entries() -> int:
    """Batches held in the batch logs of the three nodes (not yet removed or replayed)."""
    total = 0
    for i in (1, 2, 3):
        connection, session = node_session(f"127.0.0.{i}")
        try:
            total += len(list(session.execute("SELECT id FROM system.batches")))
        finally:
            connection.shutdown()
    return total


def _pending_hints(cluster) -> list:
    return [
        path
        for node in ("cassandra-1", "cassandra-2", "cassandra-3")
        for path in (cluster.CLUSTER / node / "data" / "hints").glob("*.hints")
        if path.stat().st_size > 0
    ]


def test_a_session_merge_across_a_cut_node_counts_each_event_once(
    netcut, restore_cluster, one_replica, monkeypatch
):  # fmt: skip
    config, session = one_replica
    spec = StoreSpec(
        config.keyspace, "sessions", StoreType.PARTITIONED_SESSION, 4, windowing=SessionSpec(GAP, segment_ms=SEGMENT)
    )
    table = PartitionedSessionTable(spec)
    session.execute(table.create_cql(), execution_profile=DDL_PROFILE)
    partition, segment = _split_homes(session, spec)
    word = next(w for w in (f"heron{i}" for i in range(10_000)) if table.partition_of(w.encode()) == partition)
    key, base = word.encode(), segment * SEGMENT
    # A (2 events) in segment s, B (3 events) in s + 1, more than the gap apart; written by batch 1.
    seeded_at = int(time.time() * 1_000_000)
    a = SessionEntry(key, base, base + 10_000, encode_long(2), 1, base + 10_000)
    b = SessionEntry(key, base + 70_000, base + 80_000, encode_long(3), 1, base + 80_000)
    table.apply(session, [SessionChange((), (a, b))], 1, seeded_at)

    cut = netcut.MessageCut(
        CUT_NODE, marker=_partition_key(partition, segment + 1), sparing=_partition_key(partition, segment)
    )
    watched = CutOnFirstWrite(spec, cut)
    monkeypatch.setattr(apply_sessions, "session_table_for", lambda _: watched)
    # Batch 2: one event 30 s after A and 30 s before B, which joins them.
    applier = apply_sessions.session_applier(config, spec, 2, seeded_at + 1_000)
    began = time.monotonic()
    stats = sum(applier(iter([(word, 1, base + 40_000, [base + 40_000])])), apply_module.ApplyStats())
    applied_s = time.monotonic() - began
    cut.heal()

    # Whatever timed out through the cut was retried; the merge is one change.
    assert all(isinstance(e, WriteTimeout) for e in watched.errors), watched.errors
    assert stats.written == 1, (watched.writes, stats)
    # No LOGGED batch is written any more: nothing is left in a batch log.
    left = _batch_log_entries()
    wait_until(lambda: _batch_log_entries() == 0, 90, "the batch log replayed", every_s=2)
    # What a replay could not deliver to node 3 while it was cut off became hints: delivered too.
    wait_until(lambda: not _pending_hints(restore_cluster), 120, "hints delivered", every_s=2)
    connection, reader = node_session("127.0.0.1", ConsistencyLevel.ALL)
    try:
        sessions = [
            (e.start_ms - base, e.end_ms - base, decode_long(e.value))
            for e in table.scan(reader, table.segments(reader))
        ]
    finally:
        connection.shutdown()
    assert sessions == [(0, 80_000, 6)], (sessions, f"applied in {applied_s:.1f}s, batch log held {left}")
