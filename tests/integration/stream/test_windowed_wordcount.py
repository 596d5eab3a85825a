"""The windowed word count end to end (Kafka timestamps -> Spark -> a partitioned-window
store), against a reference written here from the definitions alone: windows aligned to the
epoch, [start, end); a record counts in a window unless, at the stream time its batch started
with (the largest event time of the earlier batches), the window ended more than the grace
before it or started a retention or more before it; a record with a closed window is a dead
letter with reason `late`."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from statestore.conn import kafka as kafka_io
from statestore.core.event_time import TimedValue
from statestore.core.model import StoreSpec, StoreType
from statestore.core.windows import WindowSpec
from statestore.store.book import deadletters, registry
from statestore.store.builder import open_window_store
from statestore.store.provision import provision_store
from tests.integration.conftest import compaction_class_of, run_stream

BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z, a whole minute
WORDS = ["river", "ledger", "stone", "reed", "heron", "mill", "ford", "weir"]


class Reference:
    """Counts per (word, window start) and late records, batch by batch, by brute force."""

    def __init__(self, size: int, hop: int, grace: int, retention: int) -> None:
        self.size, self.hop, self.grace, self.retention = size, hop, grace, retention
        self.counts: Counter = Counter()
        self.late: Counter = Counter()
        self.partly_late = 0  # late records still counted in some of their windows
        self.stream_time: int | None = None

    def windows(self, t: int) -> list[int]:
        first = max(0, (t - self.size) // self.hop * self.hop)
        return [s for s in range(first, t + 1, self.hop) if s <= t < s + self.size]

    def closed(self, start: int) -> bool:
        now = self.stream_time
        return now is not None and (start + self.size + self.grace < now or start <= now - self.retention)

    def batch(self, records: list[tuple[int, str]]) -> None:
        for t, text in records:
            words = text.split()
            windows = self.windows(t)
            if words and any(self.closed(s) for s in windows):
                self.late[text] += 1
                self.partly_late += not all(self.closed(s) for s in windows)
            for word in words:
                for start in windows:
                    if not self.closed(start):
                        self.counts[(word, start)] += 1
        times = [t for t, text in records if text.split()]
        if times:
            self.stream_time = max([*times, *([self.stream_time] if self.stream_time is not None else [])])


def _records(rng: random.Random, n: int, earliest: int, latest: int, tag: str) -> list[tuple[int, str]]:
    """n records at random times in [earliest, latest), each with a unique tag word so the
    dead letters can be matched to their records."""
    return [
        (rng.randrange(earliest, latest), " ".join([*rng.choices(WORDS, k=rng.randint(1, 4)), f"{tag}{i}"]))
        for i in range(n)
    ]


def _run_batch(spark, cassandra_config, kafka_config, topic, store, checkpoint, records, **windows) -> None:
    """One available-now run reads what is new as one batch."""
    kafka_io.produce(kafka_config, topic, [TimedValue(text.encode(), t) for t, text in records])
    run_stream(spark, cassandra_config, kafka_config, topic, store, checkpoint, **windows)


def _stored(session, keyspace, store) -> Counter:
    windows = open_window_store(session, keyspace, store)
    return Counter({(w.key, w.start_ms): w.value for w in windows.all()})


def _late_letters(session, keyspace, store) -> Counter:
    letters = list(deadletters.read_all(session, keyspace, store))
    assert {d.reason for d in letters} <= {deadletters.LATE}
    return Counter(d.raw.decode() for d in letters)


def test_tumbling_windows_with_out_of_order_and_late_records_equal_the_reference(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    rng = random.Random(16)
    minute, grace = 60_000, 15_000
    reference = Reference(minute, minute, grace, 86_400_000)
    windows = {"window": minute, "grace": grace}
    batches = [
        # Minutes 0-4 in random order: nothing is late in a store's first batch.
        _records(rng, 300, BASE_MS, BASE_MS + 5 * minute, "a"),
        # 5:00-5:10, plus stragglers from minutes 2-4: stream time is 4:59.x, so minute 2 and
        # minute 3 closed (end + 15 s grace before it) and minute 4 is open.
        _records(rng, 200, BASE_MS + 5 * minute, BASE_MS + 5 * minute + 10_000, "b")
        + _records(rng, 120, BASE_MS + 2 * minute, BASE_MS + 5 * minute, "c"),
        # Only stragglers: at stream time 5:09.x minute 4 is still open by its grace alone.
        _records(rng, 80, BASE_MS + 3 * minute, BASE_MS + 5 * minute + 10_000, "d"),
    ]
    for records in batches:
        rng.shuffle(records)
        _run_batch(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp", records, **windows)
        reference.batch(records)

    assert reference.late and sum(reference.late.values()) < 200  # the corpus has both kinds
    assert _stored(session, keyspace, store_name) == reference.counts
    assert _late_letters(session, keyspace, store_name) == reference.late
    spec = registry.lookup(session, keyspace, store_name)
    assert spec.store_type.value == "partitioned-window" and spec.windowing.grace_ms == grace
    assert registry.progress(session, keyspace, store_name).max_event_time is not None


def test_hopping_windows_count_each_word_in_size_over_hop_windows(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    rng = random.Random(61)
    size, hop = 60_000, 20_000
    # Every record at least a window after the epoch-aligned BASE: all size/hop windows exist.
    records = _records(rng, 400, BASE_MS + size, BASE_MS + 6 * size, "h")
    _run_batch(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp", records, window=size, hop=hop)
    reference = Reference(size, hop, 0, 86_400_000)
    reference.batch(records)
    stored = _stored(session, keyspace, store_name)
    assert stored == reference.counts
    words = sum(len(text.split()) for _, text in records)
    assert sum(stored.values()) == words * (size // hop)
    assert not list(deadletters.read_all(session, keyspace, store_name))
    # A window store the stream creates keeps its own compaction (key-value stores get UCS).
    table = open_window_store(session, keyspace, store_name).spec.table
    assert compaction_class_of(session, keyspace, table).endswith("TimeWindowCompactionStrategy")


def _rows(session, keyspace, store) -> int:
    table = registry.lookup(session, keyspace, store).table
    return session.execute(f"SELECT COUNT(*) FROM {keyspace}.{table}").one()[0]


def test_hopping_windows_kept_as_panes_with_partly_late_records_equal_the_reference(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    """A pane row holds what its records counted in the windows open when they were applied:
    a straggler whose first windows have closed counts in the later ones only."""
    rng = random.Random(4823)
    size, hop, grace = 60_000, 20_000, 10_000
    reference = Reference(size, hop, grace, 86_400_000)
    windows = {"window": size, "hop": hop, "grace": grace}
    batches = [
        _records(rng, 300, BASE_MS + size, BASE_MS + 5 * size, "a"),
        # Stream time about 4:59: windows ending before 4:49 are closed. Stragglers from 3:00
        # on fall in closed windows (3:00-4:00 ... ) and in open ones.
        _records(rng, 150, BASE_MS + 5 * size, BASE_MS + 5 * size + 30_000, "b")
        + _records(rng, 150, BASE_MS + 3 * size, BASE_MS + 5 * size, "c"),
        _records(rng, 100, BASE_MS + 4 * size, BASE_MS + 6 * size, "d"),
    ]
    for records in batches:
        rng.shuffle(records)
        _run_batch(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp", records, **windows)
        reference.batch(records)

    assert reference.partly_late and sum(reference.late.values()) < 250
    assert _stored(session, keyspace, store_name) == reference.counts
    assert _late_letters(session, keyspace, store_name) == reference.late
    assert registry.lookup(session, keyspace, store_name).windowing.panes
    # A row per word and pane (and first open window), not one per word and window.
    assert _rows(session, keyspace, store_name) < len(reference.counts) / 2


def test_a_hopping_store_registered_with_a_row_per_window_keeps_its_layout(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    size, hop = 60_000, 20_000
    spec = StoreSpec(keyspace, store_name, StoreType.PARTITIONED_WINDOW, 4, windowing=WindowSpec(size, hop))
    provision_store(session, spec, topic)
    rng = random.Random(9)
    records = _records(rng, 120, BASE_MS + size, BASE_MS + 4 * size, "r")
    _run_batch(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp", records, window=size, hop=hop)
    reference = Reference(size, hop, 0, 86_400_000)
    reference.batch(records)
    assert _stored(session, keyspace, store_name) == reference.counts
    assert not registry.lookup(session, keyspace, store_name).windowing.panes
    assert _rows(session, keyspace, store_name) == len(reference.counts)


def test_time_ordered_input_over_many_batches_counts_every_window_once(
    spark, session, keyspace, cassandra_config, kafka_config, ordered_topic, store_name, tmp_path
):
    """Most windows of a batch start after the stream time and are written unread (the read
    elision); the windows a batch shares with the one before are added to, vouched for by the
    apply cache's files of a new store (test_apply_cache_windows). In time order with a grace
    wider than the batches' skew, nothing is late."""
    rng = random.Random(1833)
    minute = 60_000
    records = sorted(_records(rng, 3_000, BASE_MS, BASE_MS + 60 * minute, "t"))
    kafka_io.produce(kafka_config, ordered_topic, [TimedValue(text.encode(), t) for t, text in records])
    windows = {"window": minute, "hop": 20_000, "grace": 10 * minute}
    last, applier = run_stream(
        spark,
        cassandra_config,
        kafka_config,
        ordered_topic,
        store_name,
        tmp_path / "cp",
        max_offsets_per_trigger=300,
        **windows,
    )
    reference = Reference(minute, 20_000, 10 * minute, 86_400_000)
    reference.batch(records)
    assert last["batchId"] >= 8  # many batches, each reaching past the last one's stream time
    stats = applier.last.stats
    assert stats.read == 0 < stats.keys  # shared windows from the files, new ones known new
    assert not list(deadletters.read_all(session, keyspace, store_name))
    assert _stored(session, keyspace, store_name) == reference.counts


@pytest.mark.parametrize("apply_cache", [True, False], ids=["cache", "no-cache"])
def test_a_window_written_from_outside_past_the_stream_time_is_overwritten_only_with_the_cache(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path, apply_cache
):
    """The documented limit of the read elision (docs/limitations.md): with the apply cache on,
    the stream is taken to be the store's only writer, so a window past the stream time is not
    read and another program's value there is overwritten; --no-apply-cache reads and adds."""
    minute = 60_000
    windows = {"window": minute, "grace": 10 * minute, "apply_cache": apply_cache}
    first = [(BASE_MS + 1_000, "river stone")]
    _run_batch(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp", first, **windows)
    open_window_store(session, keyspace, store_name).put("river", 100, BASE_MS + 5 * minute)
    later = [(BASE_MS + 5 * minute + 1_000, "river river")]
    _run_batch(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp", later, **windows)
    stored = _stored(session, keyspace, store_name)
    assert stored[("river", BASE_MS + 5 * minute)] == (2 if apply_cache else 102)
    assert stored[("river", BASE_MS)] == 1
