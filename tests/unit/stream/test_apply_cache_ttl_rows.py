"""The apply cache never vouches for a row read carrying a TTL (issue 45): Cassandra drops such a
row when its TTL runs out, with no write a file could see, so each kind's cached apply keeps no
record of its key, and the next batch reads it again (statestore.stream.apply_cache)."""

from __future__ import annotations

from statestore.core.codecs import decode_long, encode_long
from statestore.core.model import Entry, SessionEntry, StoreSpec, StoreType, WindowedEntry
from statestore.core.windows import SessionSpec, WindowSpec
from statestore.store.tables.base import Found
from statestore.stream.apply import Delta, _apply_cached
from statestore.stream.apply_cache import BucketCache
from statestore.stream.apply_sessions import KeyTimes, apply_session_deltas
from statestore.stream.apply_windows import apply_window_deltas, window_cache_key
from statestore.stream.plan import record_of

GAP = 1_000
SESSIONS = StoreSpec("ks", "sessions", StoreType.PARTITIONED_SESSION, 1, windowing=SessionSpec(GAP, 0, None))
WINDOWS = StoreSpec("ks", "windows", StoreType.PARTITIONED_WINDOW, 1, windowing=WindowSpec(10_000))


def _found(rows: dict, expiring=()) -> Found:
    found = Found()
    found.update(rows)
    found.expiring.update(expiring)
    return found


def _trusted_after(path, apply) -> tuple[BucketCache, list[bytes]]:
    """Run `apply(file)` on a new file as one task, finish it; the file opened again as the next
    batch's task (trusted) and the keys it cannot vouch for."""
    file = BucketCache(str(path), None, fresh=False)
    apply(file)
    token = file.finish()
    file.close()
    return BucketCache(str(path), token, fresh=False), token


def _must_read(file: BucketCache, keys: list[bytes]) -> list[bytes]:
    _, to_read = file.lookup(keys)
    return [keys[i] for i in to_read]


class _KeyValues:
    def __init__(self, found: Found) -> None:
        self.found = found

    def read_entries(self, session, keys, concurrency):
        return self.found

    def write_entries(self, session, rows, concurrency, write_ts):
        pass


def test_a_key_value_row_read_with_a_ttl_is_read_again_next_batch(tmp_path):
    table = _KeyValues(
        _found({b"apple": Entry(b"apple", encode_long(2), 1), b"pear": Entry(b"pear", encode_long(5), 1)}, [b"apple"])
    )
    deltas = [Delta(b"apple", 1, None, 0), Delta(b"pear", 1, None, 0)]
    keys = [d.key for d in deltas]

    def apply(file):
        _apply_cached(None, table, 2, deltas, keys, 1, 0, None, file)

    file, _ = _trusted_after(tmp_path / "bucket", apply)
    assert _must_read(file, keys) == [b"apple"]  # pear, read without a TTL, stays vouched for
    file.close()


def test_a_key_value_row_read_with_a_ttl_in_a_complete_file_leaves_the_file_no_longer_complete(tmp_path):
    """A complete file answers absent keys without a read: with a key dropped from it, absent no
    longer means absent from the store."""
    path = tmp_path / "bucket"
    file = BucketCache(str(path), None, fresh=True)
    file.remember([(b"apple", record_of(Entry(b"apple", encode_long(2), 1)))])
    file.distrust([b"apple"])
    token = file.finish()
    file.close()
    again = BucketCache(str(path), token, fresh=False)
    assert again.complete is False and _must_read(again, [b"apple", b"fig"]) == [b"apple", b"fig"]
    again.close()


class _Windows:
    def __init__(self, found: Found) -> None:
        self.found = found

    def read(self, session, windows, concurrency):
        return self.found

    def write(self, session, entries, concurrency, write_ts):
        pass


def test_a_window_row_read_with_a_ttl_is_read_again_next_batch(tmp_path):
    rows = {
        (b"apple", 0): WindowedEntry(b"apple", 0, encode_long(2), 1),
        (b"pear", 0): WindowedEntry(b"pear", 0, encode_long(5), 1),
    }
    table = _Windows(_found(rows, [(b"apple", 0)]))
    keys = [window_cache_key(b"apple", 0), window_cache_key(b"pear", 0)]
    deltas = [Delta(key, 1, None, 0) for key in keys]

    def apply(file):
        apply_window_deltas(None, WINDOWS, 2, deltas, 1, 0, cache=file, table=table)

    file, _ = _trusted_after(tmp_path / "bucket", apply)
    assert _must_read(file, keys) == [window_cache_key(b"apple", 0)]
    file.close()


class _Sessions:
    def __init__(self, found: Found) -> None:
        self.found = found
        self.written = []

    def find_many(self, asks):
        return self.found

    def apply(self, changes, write_ts):
        self.written.extend(changes)


def test_a_session_read_with_a_ttl_and_not_rewritten_is_read_again_next_batch(tmp_path):
    """The residual c9dd5a6 documented: a late record of apple before its session (written under
    a TTL) reads the session and does not rewrite it; the record kept for apple must not vouch
    for it, or a batch after it expired joins it from the file and its count comes back."""
    under_ttl = SessionEntry(b"apple", 10_000, 10_000, encode_long(7), 1, 10_000)
    plain = SessionEntry(b"pear", 10_000, 10_000, encode_long(3), 1, 10_000)
    rows = _Sessions(_found({b"apple": [under_ttl], b"pear": [plain]}, [b"apple"]))
    deltas = [KeyTimes(Delta(b"apple", 1, None, 0), (5_000,)), KeyTimes(Delta(b"pear", 1, None, 0), (5_000,))]

    def apply(file):
        apply_session_deltas(rows, SESSIONS, 2, deltas, 0, cache=file)

    file, _ = _trusted_after(tmp_path / "bucket", apply)
    assert all(decode_long(s.value) == 1 for change in rows.written for s in change.writes)  # neither rewritten
    # A batch at 10 500 would join the session: apple's record must not be there to join it from.
    assert _must_read(file, [b"apple", b"pear"]) == [b"apple"]
    file.close()
