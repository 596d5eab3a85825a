"""`statestore windows` and `statestore sessions` against window and session stores on the real
Cassandra, and the clear refusals when a store is read as another type."""

from __future__ import annotations

import csv
import io

from statestore.cli.main import main
from statestore.core.windows import SessionSpec, WindowSpec
from statestore.store.book import deadletters
from statestore.store.builder import StoreBuilder
from statestore.store.session import SessionKey

MINUTE = 60_000


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_windows_prints_key_start_end_count_sorted_and_filtered(capsys, session, keyspace, store_name):
    store = (
        StoreBuilder(session, store_name)
        .with_keyspace(keyspace)
        .partitioned_window_store(WindowSpec(MINUTE, retention_ms=60 * MINUTE), 4)
        .create()
    )
    now = 1_764_000_000_000 - 1_764_000_000_000 % MINUTE
    written = {("cat", now): 3, ("cat", now - MINUTE): 1, ("ant", now): 7, ("dog", now - 2 * MINUTE): 2}
    # One window long past retention: the stream time below hides it.
    written[("ant", now - 90 * MINUTE)] = 5
    for (word, start), count in written.items():
        assert store.put(word, count, start, stream_time_ms=None)
    session.execute(
        f"UPDATE {keyspace}.statestore_stores SET max_event_time = %s WHERE name = %s", (now + 1000, store_name)
    )
    try:
        ks = ("--keyspace", keyspace)
        code, out, _ = _run(capsys, "windows", store_name, "--format", "csv", *ks)
        rows = list(csv.reader(io.StringIO(out)))
        assert code == 0 and rows[0] == ["key", "window_start", "window_end", "count"]
        expected = sorted(
            [(w, s, c) for (w, s), c in written.items() if s > now + 1000 - 60 * MINUTE], key=lambda t: (t[0], t[1])
        )
        assert rows[1:] == [[w, str(s), str(s + MINUTE), str(c)] for w, s, c in expected]

        code, out, _ = _run(capsys, "windows", store_name, "cat", "--from", str(now), "--format", "csv", *ks)
        assert code == 0 and list(csv.reader(io.StringIO(out)))[1:] == [["cat", str(now), str(now + MINUTE), "3"]]

        # get: the key's windows, one JSON object each (it was refused before window aggregate stores)
        code, out, _ = _run(capsys, "get", store_name, "cat", *ks)
        assert code == 0 and out.splitlines() == [
            f'{{"window_start": {s}, "window_end": {s + MINUTE}, "count": {c}}}'
            for s, c in ((now - MINUTE, 1), (now, 3))
        ]
        code, out, _ = _run(capsys, "top", store_name, "-n", "1", "--windows", "2", "--format", "csv", *ks)
        assert code == 0 and list(csv.reader(io.StringIO(out)))[1:] == [
            ["ant", str(now), str(now + MINUTE), "7"],
            ["cat", str(now - MINUTE), str(now), "1"],
        ]
        assert _run(capsys, "count", store_name, *ks)[:2] == (0, "4\n")

        # No stream fed the store: no dead-letter table, so no letters (not an error).
        code, out, _ = _run(capsys, "deadletters", store_name, "--format", "csv", *ks)
        assert code == 0 and len(list(csv.reader(io.StringIO(out)))) == 1
        # A window store's late letters, with the stream time that judged them.
        deadletters.ensure_table(session, keyspace, store_name)
        late = deadletters.DeadLetter("t", 1, 9, now - 5 * MINUTE, deadletters.LATE, "1 of its 1", b"cat", 4, now)
        deadletters.write(session, keyspace, store_name, [late])
        code, out, _ = _run(capsys, "deadletters", store_name, "--format", "csv", *ks)
        rows = list(csv.reader(io.StringIO(out)))
        assert code == 0 and rows[0][-1] == "stream_time_ms"
        assert rows[1:] == [["t", "1", "9", str(now - 5 * MINUTE), "late", "1 of its 1", b"cat".hex(), str(now)]]
    finally:
        session.execute(f"DROP TABLE {keyspace}.{store.spec.table}")
        session.execute(f"DROP TABLE IF EXISTS {keyspace}.{store_name}_deadletters")
        session.execute(f"DELETE FROM {keyspace}.statestore_stores WHERE name = %s", (store_name,))


def test_windows_of_a_key_value_store_is_refused(capsys, session, keyspace, store_name):
    store = StoreBuilder(session, store_name).with_keyspace(keyspace).partitioned_key_value_store(2).create()
    try:
        code, _, err = _run(capsys, "windows", store_name, "--keyspace", keyspace)
        assert code == 2 and "it has no windows" in err
    finally:
        session.execute(f"DROP TABLE {keyspace}.{store.spec.table}")
        session.execute(f"DELETE FROM {keyspace}.statestore_stores WHERE name = %s", (store_name,))


def test_sessions_prints_key_start_end_count_by_key_then_start(capsys, session, keyspace, store_name):
    store = (
        StoreBuilder(session, store_name)
        .with_keyspace(keyspace)
        .partitioned_session_store(SessionSpec(MINUTE, retention_ms=60 * MINUTE), 4)
        .create()
    )
    now = 1_764_000_000_000
    written = {("heron", now - 30 * MINUTE, now - 20 * MINUTE): 9, ("heron", now - 5 * MINUTE, now): 4}
    written[("ant", now - 2 * MINUTE, now - MINUTE)] = 2
    written[("ant", now - 90 * MINUTE, now - 80 * MINUTE)] = 5  # ended past retention: hidden
    for (word, start, end), count in written.items():
        assert store.put(SessionKey(word, start, end), count, stream_time_ms=None)
    session.execute(f"UPDATE {keyspace}.statestore_stores SET max_event_time = %s WHERE name = %s", (now, store_name))
    try:
        ks = ("--keyspace", keyspace)
        code, out, _ = _run(capsys, "sessions", store_name, "--format", "csv", *ks)
        rows = list(csv.reader(io.StringIO(out)))
        assert code == 0 and rows[0] == ["key", "session_start", "session_end", "count"]
        expected = sorted((w, s, e, c) for (w, s, e), c in written.items() if e > now - 60 * MINUTE)
        assert rows[1:] == [[w, str(s), str(e), str(c)] for w, s, e, c in expected]
        code, out, _ = _run(capsys, "sessions", store_name, "heron", "--format", "csv", *ks)
        assert code == 0 and len(list(csv.reader(io.StringIO(out)))) == 3
        # get, top and count (refused before session aggregate stores): the count as each session's value
        code, out, _ = _run(capsys, "get", store_name, "heron", *ks)
        assert code == 0 and out.splitlines() == [
            f'{{"session_start": {s}, "session_end": {e}, "count": {c}}}'
            for (w, s, e), c in sorted(written.items())
            if w == "heron"
        ]
        code, out, _ = _run(capsys, "top", store_name, "-n", "2", "--format", "csv", *ks)
        assert code == 0 and list(csv.reader(io.StringIO(out))) == [
            ["key", "session_start", "session_end", "count"],
            ["heron", str(now - 30 * MINUTE), str(now - 20 * MINUTE), "9"],
            ["heron", str(now - 5 * MINUTE), str(now), "4"],
        ]
        assert _run(capsys, "count", store_name, *ks)[:2] == (0, "3\n")
        code, _, err = _run(capsys, "windows", store_name, *ks)
        assert code == 2 and "it has no windows" in err
    finally:
        session.execute(f"DROP TABLE {keyspace}.{store.spec.table}")
        session.execute(f"DELETE FROM {keyspace}.statestore_stores WHERE name = %s", (store_name,))
