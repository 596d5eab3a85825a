"""The sessioned word count end to end (Kafka timestamps -> Spark -> a partitioned-session
store) against a reference written here from the definitions: per word, on-time events no more
than the gap apart form one session [first, last] whose value is its event count; a record more
than the grace older than the stream time its batch started with is late (dead letter `late`)."""

from __future__ import annotations

import random
from collections import Counter, defaultdict

from statestore.conn import kafka as kafka_io
from statestore.core.event_time import TimedValue
from statestore.store.book import deadletters, registry
from statestore.store.builder import open_session_store
from tests.integration.conftest import run_stream

BASE_MS = 1_767_225_600_000
WORDS = ["river", "ledger", "stone", "reed", "heron", "mill"]
GAP, GRACE = 30_000, 20_000


def sessions_of(times: list[int], gap: int) -> dict[tuple[int, int], int]:
    out, run = {}, []
    for t in sorted(times):
        if run and t - run[-1] > gap:
            out[(run[0], run[-1])] = len(run)
            run = []
        run.append(t)
    if run:
        out[(run[0], run[-1])] = len(run)
    return out


def test_sessions_merge_across_batches_and_late_records_are_dead_letters(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    rng = random.Random(4)
    on_time: dict[str, list[int]] = defaultdict(list)
    late: Counter = Counter()
    stream_time = None
    # Bursts of activity with quiet stretches longer than the gap; later batches reach back
    # into earlier bursts (merging into and bridging stored sessions) and past the grace.
    spans = [(0, 300_000), (200_000, 600_000), (100_000, 650_000)]
    for n, (low, high) in enumerate(spans):
        records = []
        for i in range(150):
            t = BASE_MS + rng.randrange(low, high)
            if (t - BASE_MS) % 120_000 > 80_000:
                continue  # quiet 40 s of every 2 minutes: sessions end there
            records.append((t, f"{' '.join(rng.choices(WORDS, k=rng.randint(1, 3)))} b{n}r{i}"))
        kafka_io.produce(kafka_config, topic, [TimedValue(text.encode(), t) for t, text in records])
        run_stream(
            spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp", session_gap=GAP, grace=GRACE
        )
        for t, text in records:
            if stream_time is not None and t + GRACE < stream_time:
                late[text] += 1
                continue
            for word in text.split():
                on_time[word].append(t)
        stream_time = max([t for t, _ in records] + ([stream_time] if stream_time else []))

    store = open_session_store(session, keyspace, store_name)
    stored = {(s.key, s.start_ms, s.end_ms): s.value for s in store.all()}
    expected = {(w, a, b): n for w, times in on_time.items() for (a, b), n in sessions_of(times, GAP).items()}
    assert late and stored == expected
    letters = list(deadletters.read_all(session, keyspace, store_name))
    assert Counter(d.raw.decode() for d in letters) == late and {d.reason for d in letters} == {"late"}
    # Kafka Streams' findSessions: sessions of a key ending at or after / starting at or before.
    heron = sorted((a, b) for w, a, b in expected if w == "heron")
    middle = heron[len(heron) // 2]
    found = store.find_sessions("heron", middle[1], middle[1])
    assert [(s.start_ms, s.end_ms) for s in found] == [s for s in heron if s[1] >= middle[1] and s[0] <= middle[1]]
    assert registry.lookup(session, keyspace, store_name).windowing.gap_ms == GAP
