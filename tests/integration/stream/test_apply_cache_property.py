"""Property: with the apply cache, batches stay exactly-once and read exactly what no trusted
file vouches for, whatever happens between them.

Hypothesis draws a run of steps over a small vocabulary split into two buckets, against the
real Cassandra, with the driver's ledger and the buckets' LMDB files as the job uses them
(statestore.stream.apply_cache); two directories stand for two executors. A step is one of:

- a batch: per bucket, attempts that die part-way (their writes reach Cassandra, their file
  transaction is dropped), then the attempt that finishes on a drawn executor (its token goes
  to the ledger), then maybe a speculative duplicate that also finishes;
- a restart (a new driver: an empty ledger), then maybe a replay of the last batch;
- an expiry: keys deleted from outside the stream, bracketed by the registry's
  `outside_writes` marks as the expire job does.

The model says what the store holds (each batch's deltas counted once, deleted keys gone) and
what each attempt must read: everything, unless its file holds the token the driver recorded
for the bucket at the previous batch; then only the keys the file has not seen since it was
last emptied, and nothing at all if the file started complete (a fresh store's first batch).
A cache that trusted a file it should not would show as a wrong count or a missing read; one
that trusted too little, as an extra read.
"""

from __future__ import annotations

import time
import uuid
import zlib
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statestore.core.codecs import decode_long
from statestore.core.model import EVERYTHING, StoreSpec, StoreType
from statestore.core.windows import WindowSpec
from statestore.store.provision import provision_store
from statestore.store.tables import table_for, window_table_for
from statestore.stream.apply import Delta, apply_deltas
from statestore.stream.apply_cache import BucketCache, CacheLedger
from statestore.stream.apply_windows import apply_window_deltas, window_cache_key, window_of

BUCKETS = 2
EXECUTORS = 2
_WORDS = [w.encode() for w in ("a", "b", "c", "d", "e", "f", "g", "école", "日本語", "🙂")]


class KeyValueStores:
    """The steps' keys are words of a key-value store."""

    keys = tuple(_WORDS)

    def __init__(self, session, keyspace) -> None:
        name = f"c{uuid.uuid4().hex[:16]}"
        self.spec = provision_store(session, StoreSpec(keyspace, name, StoreType.PARTITIONED_KV, 4))
        self.table = table_for(self.spec)

    def apply(self, session, batch, deltas, write_ts, cache):
        return apply_deltas(session, self.spec, batch, deltas, concurrency=4, write_ts=write_ts, cache=cache)

    def delete(self, session, key) -> None:
        self.table.delete(session, key)

    def scan(self, session) -> dict[bytes, int]:
        return {bytes(e.key): decode_long(e.value) for e in self.table.scan_unordered(session)}


class WindowStores:
    """The steps' keys are (word, window) pairs of a window store, as the window apply keys
    them (statestore.stream.apply_windows.window_cache_key), over two segments."""

    keys = tuple(window_cache_key(word, start) for word in _WORDS[:5] for start in (0, 60_000, 7_200_000))

    def __init__(self, session, keyspace) -> None:
        windowing = WindowSpec(60_000, segment_ms=3_600_000)
        name = f"c{uuid.uuid4().hex[:16]}"
        spec = StoreSpec(keyspace, name, StoreType.PARTITIONED_WINDOW, 4, windowing=windowing)
        self.spec = provision_store(session, spec)
        self.table = window_table_for(self.spec)

    def apply(self, session, batch, deltas, write_ts, cache):
        return apply_window_deltas(session, self.spec, batch, deltas, 4, write_ts, cache=cache)

    def delete(self, session, key) -> None:
        self.table.delete(session, *window_of(key))

    def scan(self, session) -> dict[bytes, int]:
        rows = self.table.fetch_range(session, self.table.segments(session), EVERYTHING)
        return {window_cache_key(bytes(e.key), e.start_ms): decode_long(e.value) for e in rows}


def _bucket(key: bytes) -> int:
    return zlib.crc32(key) % BUCKETS


@dataclass(frozen=True)
class Attempt:
    executor: int
    share: float  # the part of the bucket's deltas it writes before dying (1.0: it finishes)


@dataclass(frozen=True)
class BatchStep:
    deltas: list[Delta]
    attempts: dict[int, list[Attempt]]  # per bucket: dead attempts, then the finishing one
    duplicate: dict[int, int | None]  # per bucket: the executor of a speculative duplicate


@dataclass(frozen=True)
class Restart:
    replay_last: bool


@dataclass(frozen=True)
class Expiry:
    keys: list[bytes]


@st.composite
def steps(draw, keys):
    out = []
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["batch", "batch", "batch", "restart", "expiry"]))
        if kind == "restart":
            out.append(Restart(draw(st.booleans())))
        elif kind == "expiry":
            out.append(Expiry(draw(st.lists(st.sampled_from(keys), min_size=1, max_size=4, unique=True))))
        else:
            words = draw(st.lists(st.sampled_from(keys), min_size=1, max_size=len(keys), unique=True))
            deltas = [Delta(w, draw(st.integers(1, 5)), None) for w in words]
            attempts, duplicate = {}, {}
            for bucket in range(BUCKETS):
                dead = draw(st.lists(st.builds(Attempt, st.integers(0, EXECUTORS - 1), st.floats(0, 0.9)), max_size=2))
                attempts[bucket] = [*dead, Attempt(draw(st.integers(0, EXECUTORS - 1)), 1.0)]
                duplicate[bucket] = draw(st.none() | st.integers(0, EXECUTORS - 1))
            out.append(BatchStep(deltas, attempts, duplicate))
    return out


@dataclass
class Model:
    values: dict[bytes, int] = field(default_factory=dict)
    # What each (executor, bucket) file holds as far as trust goes: the token it carries (None
    # once a task opened it), the keys it has seen since it was last emptied, and whether it is
    # complete.
    tokens: dict[tuple[int, int], str | None] = field(default_factory=dict)
    seen: dict[tuple[int, int], set[bytes]] = field(default_factory=dict)
    complete: dict[tuple[int, int], bool] = field(default_factory=dict)

    def expected_reads(self, where: tuple[int, int], expected_token: str | None, fresh: bool, keys) -> int:
        """Opening the file: what the attempt must read (and the file's state after opening)."""
        trusted = expected_token is not None and self.tokens.get(where) == expected_token
        if not trusted:
            self.seen[where] = set()
            self.complete[where] = fresh
        self.tokens[where] = None
        if self.complete[where]:
            return 0
        return sum(1 for k in keys if k not in self.seen[where])


# The driver's event-loop thread uses the global `random` while Hypothesis generates an example.
@pytest.mark.filterwarnings("ignore:Do not use the `random` module inside strategies")
@settings(
    max_examples=40,
    deadline=None,
    database=None,
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
@pytest.mark.parametrize("kind", [KeyValueStores, WindowStores], ids=["key-value", "window"])
def test_cached_batches_are_exactly_once_and_read_only_what_no_trusted_file_vouches_for(
    session, keyspace, tmp_path_factory, kind, data
):
    run = data.draw(steps(kind.keys))
    # A store per example: completeness is about the whole store being empty at its first batch.
    store = kind(session, keyspace)
    spec = store.spec
    roots = [tmp_path_factory.mktemp("executor") for _ in range(EXECUTORS)]
    ledger, model = CacheLedger(), Model()
    batch_id, write_ts, outside_writes = 0, 1, 0
    # The last batch, while a replay of it must change nothing (no expiry since: a replay after
    # its keys were deleted would write them again, with or without the cache).
    last: tuple[int, BatchStep] | None = None

    def run_batch(step: BatchStep, batch: int, fresh: bool) -> None:
        nonlocal write_ts
        # As the job's write_ts_for: now, and above every earlier batch (an expiry's deletes,
        # stamped by the server, must lose to a later batch).
        write_ts = max(time.time_ns() // 1000, write_ts + 1)
        plan = ledger.plan(f"{spec.keyspace}.{spec.name}", batch, BUCKETS, outside_writes, fresh)
        tokens = {}
        for bucket in range(BUCKETS):
            deltas = [d for d in step.deltas if _bucket(d.key) == bucket]
            keys = {d.key for d in deltas}
            finishers = step.attempts[bucket]
            if step.duplicate[bucket] is not None:
                finishers = [*finishers, Attempt(step.duplicate[bucket], 1.0)]
            for number, attempt in enumerate(finishers):
                where = (attempt.executor, bucket)
                reached = deltas[: int(len(deltas) * attempt.share)]
                expected = plan.expected.get(bucket)
                must_read = model.expected_reads(where, expected, plan.fresh, [d.key for d in reached])
                cache = BucketCache(str(roots[attempt.executor] / f"b{bucket}"), expected, plan.fresh)
                try:
                    stats = store.apply(session, batch, reached, write_ts, cache)
                    assert stats.read == must_read, (where, [d.key for d in reached], number)
                    if attempt.share < 1.0:
                        continue  # dies: its transaction is dropped with the file's token already cleared
                    token = cache.finish()
                    # Every key of the bucket's batch is now in the file: written, or read back
                    # when a replay found it already at this batch.
                    model.tokens[where], model.seen[where] = token, model.seen[where] | set(keys)
                    if number == len(step.attempts[bucket]) - 1:
                        tokens[bucket] = token  # the driver hears of the first attempt that succeeded only
                finally:
                    cache.close()
        ledger.record(batch, BUCKETS, outside_writes, tokens.items())

    for position, step in enumerate(run):
        if isinstance(step, BatchStep):
            batch_id += 1
            run_batch(step, batch_id, fresh=position == 0)
            for d in step.deltas:
                model.values[d.key] = model.values.get(d.key, 0) + d.amount
            last = (batch_id, step)
        elif isinstance(step, Restart):
            ledger = CacheLedger()
            if step.replay_last and last is not None:
                run_batch(last[1], last[0], fresh=False)  # already applied: must change nothing
        else:
            last = None
            outside_writes = -1  # the expire job's mark while it deletes
            for key in step.keys:
                store.delete(session, key)
                model.values.pop(key, None)
            outside_writes = position + 1  # and its mark when done: a new value
        assert store.scan(session) == model.values
    session.execute(f"DROP TABLE {spec.keyspace}.{spec.table}")
    session.execute(f"DELETE FROM {spec.keyspace}.statestore_stores WHERE name = %s", (spec.name,))
