"""The apply cache: a batch reads from Cassandra only the keys its executor cannot vouch for.

The replay-safe apply (statestore.stream.apply) needs each key's current value and batch before
it writes, and that read costs more than the write (BENCHMARKS.md). Yet the values a batch
wrote are still the current ones at the next batch, provided nothing else wrote those keys in
between. The cache keeps them where the next batch of the same keys runs.

Where. Keys are split into buckets, `pmod(hash(word), N)` with N the batch's shuffle
partitions: Spark's own hash partitioning of the word, so a task of the apply normally holds
exactly one bucket. Each bucket has one SQLite file in its executor's working directory
(shared by the executor's Python workers; gone with the application), holding the entries the
bucket's tasks read or wrote, and a `token`: a random id written when a task has written its
whole batch to Cassandra, and cleared when a task starts using the file.

When it is trusted (the ledger). The driver keeps, per store, the token each bucket's task
reported at the previous batch (only a task that succeeded reports, and only one attempt of
it). A task of batch B trusts its file only if the file's token is the one the driver
recorded for that bucket at batch B-1: then this file, and no other, received that bucket's
writes of B-1, and (one writer per store, the lease) nothing of the stream wrote those keys
since. Any other case (another executor ran the bucket, a task attempt died half-way, a
restart, a replay, a changed number of buckets, the first batch of a run) empties the file
and falls back to reading, exactly as without the cache. Keys absent from a trusted file are
read too, unless the file is *complete*: started empty at a store's first batch (the store
had no entries then), so absent from it means absent from the store.

Writes from outside the stream. The expire job deletes entries while a stream runs; it marks
the store's registry row before its first delete and after its last (registry
`outside_writes`), and the driver trusts no cache in a batch that starts while that mark is
set or differs from the previous batch's. Other programs writing a store the stream feeds
(the library's put/delete) are not seen: with the cache on, the stream must be the store's
only writer besides the expire job (README, "The apply cache").

Versioned stores keep reading: their values are versions, not single entries.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from statestore.core.model import Entry

# SQLite's limit of host parameters is 32,766 since 3.32; stay well under it.
_LOOKUP_CHUNK = 900


@dataclass(frozen=True)
class CachePlan:
    """What the driver tells a batch's tasks: the number of buckets, the token each bucket's
    file must hold to be trusted, and whether files may start complete (the store is empty)."""

    store: str  # keyspace.name: part of the files' names
    buckets: int
    expected: dict[int, str] = field(default_factory=dict)
    fresh: bool = False


def bucket_expression(buckets: int) -> str:
    """Spark SQL of a word's bucket: Spark's hash partitioning of `word` into `buckets`."""
    return f"pmod(hash(word), {int(buckets)})"


@dataclass
class CacheLedger:
    """The driver's record of the tokens of one store's buckets (pure; see the module doc)."""

    batch: int | None = None
    buckets: int | None = None
    outside_writes: int | None = None
    tokens: dict[int, str] = field(default_factory=dict)

    def plan(self, store: str, batch: int, buckets: int, outside_writes: int | None, fresh: bool) -> CachePlan:
        """The plan of batch `batch`: trust last batch's tokens only if nothing happened between."""
        trusted = (
            self.batch == batch - 1
            and self.buckets == buckets
            and self.outside_writes == outside_writes
            and (outside_writes is None or outside_writes >= 0)
        )
        quiet = outside_writes is None or outside_writes >= 0
        return CachePlan(store, buckets, dict(self.tokens) if trusted else {}, fresh and quiet)

    def record(self, batch: int, buckets: int, outside_writes: int | None, tokens: dict[int, str]) -> None:
        self.batch, self.buckets, self.outside_writes, self.tokens = batch, buckets, outside_writes, dict(tokens)

    def forget(self) -> None:
        self.batch, self.tokens = None, {}


def _working_directory() -> str:
    """The executor's own directory for files (SparkFiles' root on an executor; the current
    directory elsewhere, as in unit tests)."""
    from pyspark import SparkFiles

    try:
        return SparkFiles.getRootDirectory()
    except Exception:  # noqa: BLE001 - not in a Spark worker: any private directory will do
        return os.getcwd()


class BucketCache:
    """One bucket's SQLite file, opened for one task of batch `batch`.

    Opening decides whether the file is trusted (its token is `expected`) and clears the token
    either way, so a task that dies before `finish` leaves a file nobody trusts."""

    def __init__(self, path: str, expected: str | None, fresh: bool) -> None:
        self.path = path
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=OFF")  # a cache: the application dies with the machine
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS entries (key BLOB PRIMARY KEY, value BLOB, batch_id INTEGER, time INTEGER)"
        )
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS meta (id INTEGER PRIMARY KEY CHECK (id = 0), token TEXT, complete INTEGER)"
        )
        row = self.db.execute("SELECT token, complete FROM meta WHERE id = 0").fetchone()
        self.trusted = row is not None and expected is not None and row[0] == expected
        self.complete = bool(row[1]) if self.trusted else fresh
        self.db.execute("BEGIN")
        if not self.trusted:
            self.db.execute("DELETE FROM entries")
        self.db.execute("INSERT OR REPLACE INTO meta (id, token, complete) VALUES (0, NULL, ?)", (int(self.complete),))
        self.db.execute("COMMIT")
        self.db.execute("BEGIN")

    @classmethod
    def open(cls, plan: CachePlan, bucket: int) -> BucketCache:
        directory = os.path.join(_working_directory(), "statestore-apply-cache")
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, f"{plan.store}-{plan.buckets}-{bucket}.sqlite")
        return cls(path, plan.expected.get(bucket), plan.fresh)

    def lookup(self, keys: list[bytes]) -> tuple[dict[bytes, Entry], list[bytes]]:
        """The entries the file vouches for, and the keys that must be read from Cassandra
        (none when the file is complete: what it lacks, the store lacks)."""
        found: dict[bytes, Entry] = {}
        if self.trusted:
            for start in range(0, len(keys), _LOOKUP_CHUNK):
                chunk = keys[start : start + _LOOKUP_CHUNK]
                marks = ",".join("?" * len(chunk))
                for key, value, batch_id, time_ms in self.db.execute(
                    f"SELECT key, value, batch_id, time FROM entries WHERE key IN ({marks})", chunk
                ):
                    found[bytes(key)] = Entry(bytes(key), bytes(value), batch_id, time_ms)
        if self.complete:
            return found, []
        return found, [k for k in keys if k not in found]

    def remember(self, entries: Iterable[Entry]) -> None:
        """Keep entries as the store now holds them (written by this task, or read from it)."""
        self.db.executemany(
            "INSERT OR REPLACE INTO entries (key, value, batch_id, time) VALUES (?, ?, ?, ?)",
            ((e.key, e.value, e.batch_id, e.time_ms) for e in entries),
        )

    def finish(self) -> str:
        """After every write of the task reached Cassandra: a new token, committed with the
        entries. Returns it, for the driver's ledger."""
        token = uuid.uuid4().hex
        self.db.execute("UPDATE meta SET token = ? WHERE id = 0", (token,))
        self.db.execute("COMMIT")
        return token

    def close(self) -> None:
        if self.db.in_transaction:
            self.db.execute("ROLLBACK")
        self.db.close()
