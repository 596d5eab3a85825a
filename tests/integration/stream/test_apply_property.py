"""Property: the replay-safe apply is exactly-once under random replays and partial failures.

Hypothesis draws a run of batches over a small vocabulary (non-ASCII keys included). Every
batch is attempted several times against the real Cassandra: attempts that die after writing
only a random part of the batch, then the attempt that completes it, then speculative
duplicates of the finished batch. The model is a plain dict: each batch's deltas counted once.
After every batch the example's store must equal the model (value, last batch, event time); a
late write of the previous batch, replayed through the apply or written blindly by a
zombie task that planned it before the newer batch ran, must change nothing.

Examples do not see each other: each one's keys carry a prefix no other example uses, so its
part of the store starts empty and its checks look at nothing else. A store is shared by
several examples rather than provisioned per example: Hypothesis runs hundreds of examples
while shrinking a failure, and a table per example exhausts a small Cassandra's heap.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statestore.core.codecs import decode_long
from statestore.core.model import Entry, StoreSpec, StoreType
from statestore.store.provision import provision_store
from statestore.store.tables import table_for
from statestore.stream.apply import Delta, apply_deltas, plan_writes

# Words a Spark job could count: UTF-8 text, never empty; a few fixed non-ASCII ones make
# multi-byte keys (2, 3 and 4 bytes per character) appear in nearly every example.
_NON_ASCII = ["école", "straße", "日本語", "naïve", "🙂", "ß", "Ωmega", "ключ", "e\u0301"]
_WORDS = st.one_of(
    st.sampled_from(_NON_ASCII),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=6),
)
_TIME_MS = st.one_of(st.none(), st.integers(1_700_000_000_000, 1_700_000_100_000))


@dataclass(frozen=True)
class Batch:
    batch_id: int
    write_ts: int
    deltas: list[Delta]
    partial_attempts: list[list[Delta]]  # attempts that died part-way: the deltas they reached
    duplicates: list[list[Delta]]  # speculative attempts after the batch succeeded
    stale_replay_of_previous: bool  # after this batch: a late write of the previous batch


def _subset(items: list) -> st.SearchStrategy[list]:
    """Some of `items`: a prefix (an attempt dying part-way through its writes) or, as
    concurrent writes finish in any order, any subset."""
    size = st.integers(0, len(items))
    return st.one_of(
        size.map(lambda n: items[:n]),
        st.tuples(st.permutations(items), size).map(lambda p: p[0][: p[1]]),
    )


@st.composite
def runs(draw) -> tuple[int, int, list[Batch]]:
    # Sizes are drawn first and uniformly, so the few examples are not mostly tiny ones.
    words = draw(st.lists(_WORDS, min_size=draw(st.integers(1, 40)), max_size=40))
    keys = list(dict.fromkeys(w.encode("utf-8") for w in words))  # the distinct ones, in order
    partitions = draw(st.sampled_from([1, 3, 8]))
    concurrency = draw(st.integers(1, 16))
    batch_id = draw(st.integers(0, 1000))
    write_ts = draw(st.integers(1, 10**15))
    batches = []
    for _ in range(draw(st.integers(1, 6))):
        # The batch ids and write timestamps only grow, with gaps (an empty batch writes nothing).
        batch_id += draw(st.integers(1, 3))
        write_ts += draw(st.integers(1, 10**6))
        # Spark aggregates per word: a batch holds each key at most once.
        batch_keys = draw(st.permutations(keys))[: draw(st.integers(1, len(keys)))]
        deltas = [Delta(k, draw(st.integers(1, 5)), draw(_TIME_MS)) for k in batch_keys]
        partial = draw(st.lists(_subset(deltas), max_size=3))
        duplicates = draw(st.lists(_subset(deltas) | st.just(deltas), max_size=2))
        batches.append(Batch(batch_id, write_ts, deltas, partial, duplicates, draw(st.booleans())))
    return partitions, concurrency, batches


@dataclass
class Model:
    """What the store must hold: per key the sum of its deltas over all batches (each batch
    once), the last batch that changed it and the latest event time seen."""

    values: dict[bytes, int]
    batch_ids: dict[bytes, int]
    times: dict[bytes, int | None]

    def apply(self, batch: Batch) -> None:
        for d in batch.deltas:
            self.values[d.key] = self.values.get(d.key, 0) + d.amount
            self.batch_ids[d.key] = batch.batch_id
            times = [t for t in (self.times.get(d.key), d.time_ms) if t is not None]
            self.times[d.key] = max(times) if times else None

    def expected(self) -> dict[bytes, tuple[int, int, int | None]]:
        return {k: (v, self.batch_ids[k], self.times[k]) for k, v in self.values.items()}


# A store takes examples until it holds this many entries, then a new one is provisioned:
# scans stay small (under Cassandra's tombstone warning: a null event time is a tombstone
# cell), and so does the number of tables however many examples run.
_ENTRIES_PER_STORE = 800


class _Stores:
    """Provisions stores on demand (one per layout at a time) and hands out fresh key spaces."""

    def __init__(self, session, keyspace: str) -> None:
        self.session, self.keyspace = session, keyspace
        self.current: dict[tuple[StoreType, int], tuple[StoreSpec, int]] = {}

    def take(self, store_type: StoreType, partitions: int, keys: int) -> tuple[StoreSpec, bytes]:
        """A store for an example writing `keys` distinct keys, and the prefix to put them under."""
        layout = (store_type, partitions)
        spec, entries = self.current.get(layout, (None, 0))
        if spec is None or entries + keys > _ENTRIES_PER_STORE:
            name = f"p{uuid.uuid4().hex[:16]}"
            spec, entries = provision_store(self.session, StoreSpec(self.keyspace, name, store_type, partitions)), 0
        self.current[layout] = (spec, entries + keys)
        return spec, f"{uuid.uuid4().hex[:12]}/".encode()


@pytest.fixture
def stores(session, keyspace) -> _Stores:
    return _Stores(session, keyspace)


Content = dict[bytes, tuple[int, int | None, int | None]]


def _scanned(session, table, prefix: bytes) -> Content:
    """The example's part of the store (its keys, under `prefix`), by a full sorted scan."""
    entries = list(table.scan_sorted(session))
    keys = [bytes(e.key) for e in entries]
    assert keys == sorted(keys), "scan_sorted must return the keys in byte order"
    assert len(set(keys)) == len(keys), "scan_sorted returned a key twice"
    return {bytes(e.key): (decode_long(e.value), e.batch_id, e.time_ms) for e in entries if e.key.startswith(prefix)}


def _read(session, table, keys: set[bytes], concurrency: int) -> Content:
    """The stored entries among `keys`: cheaper than a scan, for the checks in between."""
    found = table.read_entries(session, list(keys), concurrency)
    return {bytes(k): (decode_long(e.value), e.batch_id, e.time_ms) for k, e in found.items()}


def _under(prefix: bytes, batch: Batch) -> Batch:
    """`batch` with every key moved under `prefix`."""

    def moved(deltas: list[Delta]) -> list[Delta]:
        return [Delta(prefix + d.key, d.amount, d.time_ms) for d in deltas]

    return Batch(
        batch.batch_id,
        batch.write_ts,
        moved(batch.deltas),
        [moved(a) for a in batch.partial_attempts],
        [moved(a) for a in batch.duplicates],
        batch.stale_replay_of_previous,
    )


def _apply(session, spec, batch: Batch, deltas: list[Delta], concurrency: int):
    return apply_deltas(session, spec, batch.batch_id, deltas, concurrency=concurrency, write_ts=batch.write_ts)


# The driver's event-loop thread uses the global `random` (reconnection jitter, the delay before
# refreshing the schema after a schema event, which any DDL on the cluster sends) while
# Hypothesis generates an example; it takes that for the strategy using `random`.
@pytest.mark.filterwarnings("ignore:Do not use the `random` module inside strategies")
@pytest.mark.parametrize("store_type", [t for t in StoreType if not t.timed])
@settings(
    max_examples=50,
    deadline=None,
    database=None,  # no .hypothesis/ directory in the work tree; failures print their example
    report_multiple_bugs=False,  # shrink one failure only: every example costs round trips
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(run=runs())
def test_apply_is_exactly_once_under_replays_and_partial_failures(session, stores, store_type, run):
    partitions, concurrency, batches = run
    keys = {d.key for b in batches for d in b.deltas}
    spec, prefix = stores.take(store_type, partitions if store_type is StoreType.PARTITIONED_KV else 1, len(keys))
    batches = [_under(prefix, b) for b in batches]
    keys = {prefix + k for k in keys}
    table = table_for(spec)
    model = Model({}, {}, {})
    previous: tuple[Batch, list[Entry]] | None = None

    for batch in batches:
        # A zombie attempt of this batch: it read the store and planned its writes now, and
        # will only send them after the next batch is applied (checked below).
        zombie_writes, _ = plan_writes(
            table.read_entries(session, [d.key for d in batch.deltas], concurrency), batch.deltas, batch.batch_id
        )

        # Attempts that die part-way: each one writes exactly the keys no earlier attempt reached.
        reached: set[bytes] = set()
        for attempt in batch.partial_attempts:
            stats = _apply(session, spec, batch, attempt, concurrency)
            already = {d.key for d in attempt} & reached
            assert (stats.written, stats.skipped) == (len(attempt) - len(already), len(already))
            reached |= {d.key for d in attempt}

        # The attempt that completes the batch writes the rest and skips what was reached.
        stats = _apply(session, spec, batch, batch.deltas, concurrency)
        assert (stats.written, stats.skipped) == (len(batch.deltas) - len(reached), len(reached))
        model.apply(batch)
        content = _scanned(session, table, prefix)
        assert content == model.expected()

        # Speculative duplicates of the finished batch write nothing.
        for attempt in batch.duplicates:
            stats = _apply(session, spec, batch, attempt, concurrency)
            assert (stats.written, stats.skipped) == (0, len(attempt))
        assert _read(session, table, keys, concurrency) == content

        # Every key of the batch reads back by point lookup as last written by this batch.
        for d in batch.deltas:
            entry = table.get(session, d.key)
            assert entry is not None
            assert (decode_long(entry.value), entry.batch_id, entry.time_ms) == content[d.key]
            assert entry.batch_id == batch.batch_id

        # A late write of the previous batch, with its own timestamp, changes nothing: replayed
        # through the apply it skips every key (their batch_id is already >= its id); sent
        # blindly by a zombie that planned before this batch ran, its cells lose to this
        # batch's newer timestamp or carry exactly the values already stored.
        if previous is not None and batch.stale_replay_of_previous:
            old, old_zombie_writes = previous
            stats = _apply(session, spec, old, old.deltas, concurrency)
            assert (stats.written, stats.skipped) == (0, len(old.deltas))
            table.write_entries(session, old_zombie_writes, concurrency, old.write_ts)
            assert _read(session, table, keys, concurrency) == content

        previous = (batch, zombie_writes)
