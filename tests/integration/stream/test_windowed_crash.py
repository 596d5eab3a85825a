"""Hard crashes of a windowed and a sessioned stream: SIGKILL inside a batch's window (session)
writes and at random moments, restart from the same checkpoint, and every window's (session's)
count and every late record's dead letter is still exact.

Which records are late depends on the stream time each batch starts with, so on where the
batches were cut, and kills move the cuts. The input is built so that lateness does not
depend on them: the first phase has only on-time records (all within an hour's grace of each
other); the second adds stragglers a day older than anything, late whatever the cut."""

from __future__ import annotations

import random
import signal
from collections import Counter

from statestore.conn import kafka as kafka_io
from statestore.core.event_time import TimedValue
from statestore.store.book import deadletters, registry
from statestore.store.builder import open_session_store, open_window_store
from tests.integration.stream.test_crash_recovery import _failure, _launch, launch_and_kill_at_random
from tests.integration.stream.test_session_wordcount import sessions_of

BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
MINUTE = 60_000
WORDS = [f"w{i}" for i in range(300)]
WINDOW_ARGS = ("--window", "1m", "--grace", "1h")
SESSION_ARGS = ("--session-gap", "20s", "--grace", "1h")
FORCED_KILLS = 2  # inside batch 0 (no batch before it) and batch 1 (one before it)


def _records(rng: random.Random, n: int, earliest: int, span: int, tag: str) -> list[tuple[int, str]]:
    return [
        (earliest + rng.randrange(span), " ".join([*rng.choices(WORDS, k=rng.randint(1, 8)), f"{tag}{i}"]))
        for i in range(n)
    ]


def _count(records, reference: Counter) -> None:
    for t, text in records:
        for word in text.split():
            reference[(word, t - t % MINUTE)] += 1


def _stored(session, keyspace, store) -> Counter:
    return Counter({(w.key, w.start_ms): w.value for w in open_window_store(session, keyspace, store).all()})


def _run_to_end(proc, checkpoint) -> None:
    proc.wait(timeout=900)
    assert proc.returncode == 0, _failure(checkpoint)


def _crash_and_recover(session, keyspace, kafka_config, topic, store_name, checkpoint, job_args, on_time_done):
    """Phase 1 (on-time records) with kills inside batches 0 and 1 and at a random moment,
    then to the end: `on_time_done(records)` checks the store. Phase 2 (more on-time records
    and day-old stragglers) killed inside a write again, then to the end. Returns (every
    on-time record, the stragglers)."""
    rng = random.Random(1616)
    launch = lambda fault=None: _launch(topic, store_name, checkpoint, keyspace, fault, *job_args)  # noqa: E731
    on_time = _records(rng, 40_000, BASE_MS, 20 * MINUTE, "a")
    kafka_io.produce(kafka_config, topic, [TimedValue(text.encode(), t) for t, text in on_time])
    for target in range(FORCED_KILLS):
        proc = launch(f"kill-mid-write:{target}")
        proc.wait(timeout=600)
        assert proc.returncode == -signal.SIGKILL, f"no batch {target} to stop inside\n{_failure(checkpoint)}"
        progress = registry.progress(session, keyspace, store_name)
        assert progress.pending_batch_id == target
        assert progress.last_batch_id == (target - 1 if target > 0 else None)
    proc = launch_and_kill_at_random(launch, session, keyspace, store_name, rng)
    proc.wait(timeout=60)
    _run_to_end(launch(), checkpoint)
    on_time_done(on_time)
    assert list(deadletters.read_all(session, keyspace, store_name)) == []

    more = _records(rng, 15_000, BASE_MS + 20 * MINUTE, 20 * MINUTE, "b")
    stragglers = _records(rng, 5_000, BASE_MS - 86_400_000, 20 * MINUTE, "c")
    mixed = more + stragglers
    rng.shuffle(mixed)
    kafka_io.produce(kafka_config, topic, [TimedValue(text.encode(), t) for t, text in mixed])
    next_batch = registry.progress(session, keyspace, store_name).last_batch_id + 1
    proc = launch(f"kill-mid-write:{next_batch}")
    proc.wait(timeout=600)
    assert proc.returncode == -signal.SIGKILL, _failure(checkpoint)
    _run_to_end(launch(), checkpoint)
    letters = list(deadletters.read_all(session, keyspace, store_name))
    assert {d.reason for d in letters} == {deadletters.LATE}
    assert Counter(d.raw.decode() for d in letters) == Counter(text for _, text in stragglers)
    return on_time + more


def test_sigkill_inside_window_writes_and_at_random_keeps_windows_and_late_letters_exact(
    session, keyspace, kafka_config, topic, store_name, tmp_path
):
    def windows_of(records) -> Counter:
        reference: Counter = Counter()
        _count(records, reference)
        return reference

    def check(records) -> None:
        assert _stored(session, keyspace, store_name) == windows_of(records)

    counted = _crash_and_recover(
        session, keyspace, kafka_config, topic, store_name, tmp_path / "cp", WINDOW_ARGS, check
    )
    check(counted)


def test_sigkill_inside_session_merges_and_at_random_keeps_sessions_and_late_letters_exact(
    session, keyspace, kafka_config, topic, store_name, tmp_path
):
    def sessions_expected(records) -> dict:
        times: dict[str, list[int]] = {}
        for t, text in records:
            for word in text.split():
                times.setdefault(word, []).append(t)
        return {(w, a, b): n for w, ts in times.items() for (a, b), n in sessions_of(ts, 20_000).items()}

    def check(records) -> None:
        store = open_session_store(session, keyspace, store_name)
        assert {(s.key, s.start_ms, s.end_ms): s.value for s in store.all()} == sessions_expected(records)

    counted = _crash_and_recover(
        session, keyspace, kafka_config, topic, store_name, tmp_path / "cp", SESSION_ARGS, check
    )
    check(counted)
