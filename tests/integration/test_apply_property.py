"""Property: the replay-safe apply is exactly-once under random replays and partial failures.

Hypothesis draws a run of batches over a small vocabulary (non-ASCII keys included). Every
batch is attempted several times against the real Cassandra: attempts that die after writing
only a random part of the batch, then the attempt that completes it, then speculative
duplicates of the finished batch. The model is a plain dict: each batch's deltas counted once.
After every batch the whole store must equal the model (value, last batch, event time), and a
late write of the previous batch, whether replayed through the apply or written blindly by a
zombie task that planned it before the newer batch ran, must change nothing.

Each example gets its own freshly provisioned store, so examples do not see each other's data.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from statestore.apply import Delta, apply_deltas, plan_writes
from statestore.codecs import decode_long
from statestore.provision import provision_store
from statestore.stores import Entry, StoreSpec, StoreType, table_for

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
    partitions = draw(st.integers(1, 8))
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


def _content(session, table) -> dict[bytes, tuple[int, int | None, int | None]]:
    entries = list(table.scan_sorted(session))
    keys = [bytes(e.key) for e in entries]
    assert keys == sorted(keys), "scan_sorted must return the keys in byte order"
    assert len(set(keys)) == len(keys), "scan_sorted returned a key twice"
    return {bytes(e.key): (decode_long(e.value), e.batch_id, e.time_ms) for e in entries}


def _apply(session, spec, batch: Batch, deltas: list[Delta], concurrency: int):
    return apply_deltas(session, spec, batch.batch_id, deltas, concurrency=concurrency, write_ts=batch.write_ts)


@pytest.mark.parametrize("store_type", list(StoreType))
@settings(
    max_examples=20,
    deadline=None,
    database=None,  # no .hypothesis/ directory in the work tree; failures print their example
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(run=runs())
def test_apply_is_exactly_once_under_replays_and_partial_failures(session, keyspace, store_type, run):
    partitions, concurrency, batches = run
    name = f"p{uuid.uuid4().hex[:16]}"
    spec = provision_store(
        session, StoreSpec(keyspace, name, store_type, partitions if store_type is StoreType.PARTITIONED_KV else 1)
    )
    table = table_for(spec)
    model = Model({}, {}, {})
    event(f"batches: {len(batches)}")
    event(f"partial attempts: {sum(len(b.partial_attempts) for b in batches)}")
    event(f"duplicates: {sum(len(b.duplicates) for b in batches)}")
    event(f"stale replays: {sum(b.stale_replay_of_previous for b in batches[1:])}")
    event(f"max keys per batch: {max(len(b.deltas) for b in batches) // 10 * 10}+")
    event(f"vocab: {len({d.key for b in batches for d in b.deltas}) // 10 * 10}+")
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
        assert _content(session, table) == model.expected()

        # Speculative duplicates of the finished batch write nothing.
        for attempt in batch.duplicates:
            stats = _apply(session, spec, batch, attempt, concurrency)
            assert (stats.written, stats.skipped) == (0, len(attempt))
        content = _content(session, table)
        assert content == model.expected()

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
            assert _content(session, table) == content

        previous = (batch, zombie_writes)
