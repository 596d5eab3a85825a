"""The apply cache: a batch reads from Cassandra only the keys its executor cannot vouch for.

The replay-safe apply (statestore.stream.apply) needs each key's current value and batch before
it writes, and that read costs more than the write (BENCHMARKS.md). Yet the values a batch
wrote are still the current ones at the next batch, provided nothing else wrote those keys in
between. The cache keeps them where the next batch of the same keys runs.

Where. Keys are split into buckets, `pmod(hash(word), N)` with N the batch's shuffle
partitions (window stores: `pmod(hash(word, window_start), N)`): Spark's own hash partitioning
of the apply's grouping key, so a task of the apply holds exactly one bucket, and no other task
of the batch holds rows of it. Each bucket has one LMDB environment (a memory-mapped, transactional
key-value file that several processes may open) in its executor's working directory (shared
by the executor's Python workers; gone with the application), holding the entries the
bucket's tasks read or wrote (as statestore.stream.plan's records, bytes the plan reads and
makes as arrays, never decoded into an Entry per key), and a `token`: a random id written
when a task has written its whole batch to Cassandra, and cleared when a task starts using
the file. A small batch the
driver applies itself (statestore.stream.batch_apply.on_driver_for) uses the files of the
driver's working directory the same way, one bucket at a time: in local mode the executors'
own, on a cluster files of its own, whose tokens then differ from the executors'.

When it is trusted (the ledger). The driver keeps, per store, the token each bucket's task
reported at the previous batch (only a task that succeeded reports, and only one attempt of
it). A task of batch B trusts its file only if the file's token is the one the driver
recorded for that bucket at batch B-1: then this file, and no other, received that bucket's
writes of B-1, and (one writer per store, the lease) nothing of the stream wrote those keys
since. Any other case (another executor ran the bucket, a task attempt died half-way, a
restart, a replay, a changed number of buckets, the first batch of a run, a bucket that two
tasks reported) empties the file and falls back to reading, exactly as without the cache.
Keys absent from a trusted file are read too, unless the file is *complete*: started empty at a
store's first batch (the store had no entries then), so absent from it means absent from the
store.

Writes from outside the stream. The expire job deletes entries while a stream runs; it marks
the store's registry row before its first delete and after its last (registry
`outside_writes`), and the driver trusts no cache in a batch that starts while that mark is
set or differs from the previous batch's. From window stores it drops whole segments of
windows past retention, unmarked: those windows closed at a stream time no later than the
stream's, so no batch writes them again, and a task forgets them from its file
(statestore.stream.apply_windows). Other programs writing a store the stream feeds
(the library's put/delete) are not seen: with the cache on, the stream must be the store's
only writer besides the expire job (docs/streaming-job.md and docs/consistency.md).

A table TTL. Cassandra drops an expired row without any write the cache could see, so no
batch uses the cache while the store's table has a default TTL, nor until the rows written
under it can no longer expire (CacheLedger.admits). Every run that sees the TTL, cache on or
off, records that time in the store's registry (`ttl_expiring_until`, ttl_expiry_to_record), so
a later run distrusts the cache until then even when the TTL was removed before it started.
A TTL set by CQL alone after a batch's plan and removed before the next one is seen by no plan
and leaves no mark; but every ALTER of a table moves on the write time of its schema row, so
each plan reads that with the TTL (statestore.conn.cassandra.TableTtl, schema_mark), and a
plan that finds another mark than the previous plan's trusts no token (CacheLedger.admits): the
batch reads every key, as after a restart. Its files then hold only what it read and wrote
again without the TTL, so the cache serves from the batch after. A schema change elsewhere (a
table of any keyspace created, altered or dropped) leaves the mark as it was, unless the
cluster's nodes still disagree on the schema at a plan: a change that may not have reached the
contacted node yet makes that batch, and the next, read instead of trusting its files. And no
file keeps a row read carrying a TTL: each kind's apply reads select `TTL(value)` beside the
row (the tables' `noting_ttl()`), and remember_unless_expiring drops such a key from the file,
so the next batch reads it again.
A session store's record keeps every session the batch read, not only those it rewrote: one
written under the TTL that the batch did not rewrite (a late record before it) would otherwise
be joined from the file after it expired. Key-value and window rows read are rewritten, so
theirs are only read once more. What is left: the versions are those the contacted node knows,
its own and its peers' through gossip, so a change that has reached neither when the next plan
reads them goes unseen, and a batch's files may then vouch for rows it wrote under that TTL.
Set TTLs with statestore.store.admin.alter_store, which records the mark first and covers it.

Session stores keep, per key, its sessions a batch can still touch, from a coverage time on
(statestore.stream.session_cache; bucketed by the word alone). Versioned stores keep reading:
a change of theirs spans versions.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field

import lmdb

from statestore.conn.cassandra import TableTtl
from statestore.store.book.registry import ttl_expiry_to_record
from statestore.store.tables.base import Found

# Address space an environment may grow into (the file holds only what is written).
_MAP_SIZE = 1 << 40


@dataclass(frozen=True)
class CachePlan:
    """What the driver tells a batch's tasks: the number of buckets, the token each bucket's
    file must hold to be trusted, and whether files may start complete (the store is empty)."""

    store: str  # keyspace.name: part of the files' names
    buckets: int
    expected: dict[int, str] = field(default_factory=dict)
    fresh: bool = False
    # Set every SWEEP_EVERY batches: this batch's tasks remove files no plan will trust again
    # (sweep_stale), once per working directory; `issued_at`: when the driver made the plan.
    sweep_batch: int | None = None
    issued_at: float = 0.0


def bucket_expression(buckets: int, columns: tuple[str, ...] = ("word",)) -> str:
    """Spark SQL of a row's bucket: Spark's hash partitioning of `columns` (the apply's grouping
    key: the word, or the word and its window) into `buckets`, so each task of the apply holds
    one bucket, and every row of a bucket is in that task."""
    return f"pmod(hash({', '.join(columns)}), {int(buckets)})"


def tokens_by_bucket(reported: Iterable[tuple[int, str]]) -> dict[int, str]:
    """Pure: the token to expect of each bucket at the next batch, from the (bucket, token) pairs
    a batch's tasks reported, leaving out any bucket reported more than once: two tasks then
    shared its file (a layout that cut a bucket's rows apart), and the one that opened it second
    emptied what the first wrote, so no single file holds the bucket's batch."""
    tokens: dict[int, str] = {}
    twice: set[int] = set()
    for bucket, token in reported:
        if bucket in tokens:
            twice.add(bucket)
        tokens[bucket] = token
    return {bucket: token for bucket, token in tokens.items() if bucket not in twice}


@dataclass
class CacheLedger:
    """The driver's record of the tokens of one store's buckets (pure; see the module doc)."""

    batch: int | None = None
    buckets: int | None = None
    outside_writes: int | None = None
    tokens: dict[int, str] = field(default_factory=dict)
    expiring_until: float = float("-inf")  # rows written under a table TTL may expire until then
    schema_mark: frozenset[str] | None = None  # the table's (TableTtl), at the previous plan (None: none yet)

    def plan(
        self,
        store: str,
        batch: int,
        buckets: int,
        outside_writes: int | None,
        fresh: bool,
    ) -> CachePlan:
        """The plan of batch `batch`: trust last batch's tokens only if nothing happened between."""
        trusted = (
            self.batch == batch - 1
            and self.buckets == buckets
            and self.outside_writes == outside_writes
            and (outside_writes is None or outside_writes >= 0)
        )
        quiet = outside_writes is None or outside_writes >= 0
        sweep = batch if batch % SWEEP_EVERY == 0 else None
        expected = dict(self.tokens) if trusted else {}
        return CachePlan(store, buckets, expected, fresh and quiet, sweep, time.time())

    def record(
        self,
        batch: int,
        buckets: int,
        outside_writes: int | None,
        reported: Iterable[tuple[int, str]],
    ) -> None:
        """What batch `batch` ended with: the (bucket, token) pairs its tasks reported
        (tokens_by_bucket decides which to trust)."""
        self.batch, self.buckets, self.outside_writes, self.tokens = (
            batch,
            buckets,
            outside_writes,
            tokens_by_bucket(reported),
        )

    def forget(self) -> None:
        self.batch, self.tokens = None, {}

    def admits(self, table: TableTtl, now_s: float, recorded_until_s: float | None = None) -> bool:
        """Whether a batch starting at `now_s` (wall-clock seconds) may use the cache, given the
        table's default TTL now and the time until which the store's registry says rows written
        under a TTL may expire (`recorded_until_s`, from any earlier run: ttl_expiry_to_record).
        Never while the table has a TTL: Cassandra drops a row when it expires, and a file holding
        it would bring its count back. Nor until the rows written under it can no longer expire.
        A recorded time later than any this ledger knew (statestore.store.admin.alter_store records one
        before it sets a TTL, maybe while a batch writes) also ends the trust in every token:
        a file of that batch may hold a row written under the TTL. So does a schema mark other
        than the previous plan's (`table.schema_mark`): a TTL may have been set by CQL alone
        after that plan read none and removed before this one, leaving no other trace."""
        if self.schema_mark is not None and table.schema_mark != self.schema_mark:
            self.forget()
        self.schema_mark = table.schema_mark
        if recorded_until_s is not None:
            if recorded_until_s > self.expiring_until:
                self.forget()
            self.expiring_until = max(self.expiring_until, recorded_until_s)
        if table.ttl_s:
            self.expiring_until = max(self.expiring_until, now_s + table.ttl_s)
            return False
        return now_s >= self.expiring_until


def batch_cache_plan(
    ledger: CacheLedger | None,
    store: str,
    batch_id: int,
    buckets: Callable[[], int],
    outside_writes: int | None,
    recorded_until_s: float | None,
    has_batches: bool,
    table: TableTtl,
    now_s: float,
    store_is_empty: Callable[[], bool],
) -> tuple[float | None, CachePlan | None]:
    """Pure but for the two callables (asked only when needed): the driver's decision for one
    batch (statestore.stream.batches.BatchApplier.cache_plan does the I/O around it, the
    simulator its fakes): the TTL mark to record in the registry first (None: leave it;
    ttl_expiry_to_record), then the batch's plan (None: no cache for this batch; `ledger`
    None: the cache is off). Files may start complete only at the store's very first batch,
    when it holds nothing."""
    mark = ttl_expiry_to_record(table.ttl_s, now_s, recorded_until_s)
    if ledger is None or not ledger.admits(table, now_s, recorded_until_s):
        return mark, None
    count = buckets()
    fresh = not has_batches and store_is_empty()
    return mark, ledger.plan(store, batch_id, count, outside_writes, fresh)


def expiring_keys(found) -> Collection:
    """The keys of a read's result whose rows carry a TTL: a Found's (a table's reads with
    `noting_ttl()`); none for any other mapping (a reader that cannot tell: the protocol
    simulator's fakes)."""
    return found.expiring if isinstance(found, Found) else ()


def remember_unless_expiring(
    cache: BucketCache, records: list[tuple[bytes, bytes]], expiring: Collection[bytes]
) -> None:
    """Keep a slice's (key, record) pairs in its bucket's file, but none of a key in `expiring`
    (its row was read carrying a TTL: see the module doc), which the file then forgets, so the
    next batch reads it again. The one rule of every kind's cached apply; without such keys,
    the records are kept as they are."""
    if expiring:
        records = [item for item in records if item[0] not in expiring]
        cache.distrust(expiring)
    cache.remember(records)


# How often (in batches) tasks remove the files of buckets that moved to another executor.
SWEEP_EVERY = 16
# File times run on a coarse clock (a few ms behind time.time()): a file finished just after
# the plan was made must not look older than the plan.
_MTIME_SLACK_S = 1.0


def is_stale(token: str | None, expected: Iterable[str], modified_at: float, issued_at: float) -> bool:
    """Pure: whether a bucket file can go. Only a finished file (it holds a token) that the
    plan does not expect, finished before the plan was made (one that a task of this very
    batch finished has a token no plan has seen yet): no later plan will trust it, since the
    driver only ever expects the tokens of the batch before. An open file has no token."""
    return token is not None and token not in set(expected) and modified_at < issued_at - _MTIME_SLACK_S


def sweep_stale(plan: CachePlan, directory: str | None = None) -> int:
    """Remove the files of `plan.store` in this working directory that is_stale says no plan
    will trust again (a bucket that moved to another executor keeps its file otherwise, as
    large as the bucket, until the application ends); once per directory per sweep batch.
    Returns how many went. Removing a file only ever costs reads: a task that has it open
    keeps writing the unlinked file, and the next plan does not expect its token's file."""
    if plan.sweep_batch is None:
        return 0
    directory = directory or os.path.join(_working_directory(), "statestore-apply-cache")
    try:
        marker = os.open(os.path.join(directory, f"{plan.store}.swept-{plan.sweep_batch}"), os.O_CREAT | os.O_EXCL)
    except FileExistsError:
        return 0  # another task of this batch sweeps here
    except FileNotFoundError:
        return 0  # no files at all
    os.close(marker)
    removed = 0
    expected = plan.expected.values()
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        try:
            if name.startswith(f"{plan.store}.swept-") and not name.endswith(f"-{plan.sweep_batch}"):
                os.remove(path)
            elif name.startswith(f"{plan.store}-") and os.path.isdir(path):
                modified_at = os.path.getmtime(os.path.join(path, "data.mdb"))
                if is_stale(_token_of(path), expected, modified_at, plan.issued_at):
                    shutil.rmtree(path, ignore_errors=True)
                    removed += 1
        except FileNotFoundError:  # removed meanwhile, by a task of another executor sharing the directory
            continue
    return removed


def _token_of(path: str) -> str | None:
    """The token a bucket file holds, read without writing (None: none, or unreadable)."""
    try:
        env = lmdb.open(path, readonly=True, max_dbs=2, readahead=False)
    except lmdb.Error:
        return None
    try:
        with env.begin() as txn:
            token = txn.get(b"token", db=env.open_db(b"meta", txn=txn, create=False))
        return None if token is None else token.decode()
    except lmdb.Error:
        return None
    finally:
        env.close()


def _working_directory() -> str:
    """The executor's own directory for files (SparkFiles' root on an executor; the current
    directory elsewhere, as in unit tests)."""
    from pyspark import SparkFiles

    try:
        return SparkFiles.getRootDirectory()
    except Exception:  # noqa: BLE001 - not in a Spark worker: any private directory will do
        return os.getcwd()


def trust_on_open(token: str | None, expected: str | None, was_complete: bool, fresh: bool) -> tuple[bool, bool]:
    """Pure: what a task opening a bucket's file may take from it, as (trusted, complete): its
    entries only if the file holds the token the plan expects (`token`, None: none); complete
    (absent from it means absent from the store) as the file was if trusted, else only if the
    plan says files start complete (`fresh`, the store's first batch, the file then emptied)."""
    trusted = token is not None and expected is not None and token == expected
    return trusted, was_complete if trusted else fresh


def keys_to_read(found: list[bytes | None], complete: bool, too_long: list[bool]) -> list[int]:
    """Pure: the positions of the keys a task must read from Cassandra, given what its file
    vouches for of each (`found`, None: nothing): none but keys too long for the file when the
    file is complete, else every key it has no record of."""
    if complete:
        return [i for i, long in enumerate(too_long) if long]
    return [i for i, record in enumerate(found) if record is None]


class BucketCache:
    """One bucket's LMDB environment, opened for one task.

    Opening decides whether the file is trusted (its token is `expected`) and clears the token
    either way, so a task that dies before `finish` leaves a file nobody trusts. The task then
    holds the environment's one write transaction until `finish` commits it (or `close`
    drops it): a second attempt of the same task waits for the first. Opening also leaves the
    opener's own mark in the file, checked again once that transaction is held: had another
    task opened the file in between (two tasks holding rows of one bucket; the ledger then
    trusts that bucket at no later batch), what it did to the file is unknown here, so the file
    is neither trusted nor complete for this task (`hold`)."""

    def __init__(self, path: str, expected: str | None, fresh: bool, *, hold: bool = True) -> None:
        # No fsync: a cache lives as long as its application, which dies with the machine.
        self.env = lmdb.open(
            path,
            map_size=_MAP_SIZE,
            max_dbs=2,
            sync=False,
            metasync=False,
            readahead=False,
        )
        self.entries = self.env.open_db(b"entries")
        self.meta = self.env.open_db(b"meta")
        self.longest_key = self.env.max_key_size()  # longer keys are never cached, always read
        self._mark = uuid.uuid4().bytes
        with self.env.begin(write=True) as txn:
            token = txn.get(b"token", db=self.meta)
            self.trusted, self.complete = trust_on_open(
                None if token is None else token.decode(), expected, txn.get(b"complete", db=self.meta) == b"1", fresh
            )
            if not self.trusted:
                txn.drop(self.entries, delete=False)
            txn.delete(b"token", db=self.meta)
            txn.put(b"complete", b"1" if self.complete else b"0", db=self.meta)
            txn.put(b"opener", self._mark, db=self.meta)
        self.txn = None
        if hold:
            self.hold()

    def hold(self) -> None:
        """Take the write transaction the task works in, and keep the trust decided at opening
        only if no other task opened the file since."""
        self.txn = self.env.begin(write=True)
        if self.txn.get(b"opener", db=self.meta) != self._mark:
            self.trusted = self.complete = False

    @classmethod
    def open(cls, plan: CachePlan, bucket: int) -> BucketCache:
        directory = os.path.join(_working_directory(), "statestore-apply-cache")
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, f"{plan.store}-{plan.buckets}-{bucket}")
        return cls(path, plan.expected.get(bucket), plan.fresh)

    def lookup(self, keys: list[bytes]) -> tuple[list[bytes | None], list[int]]:
        """The record the file vouches for of each key (None where it has none), and the
        positions of the keys that must be read from Cassandra (none when the file is complete:
        what it lacks, the store lacks; but a key too long for LMDB is always read)."""
        if self.trusted:
            get, entries, longest = self.txn.get, self.entries, self.longest_key
            found = [get(key, db=entries) if len(key) <= longest else None for key in keys]
        else:
            found = [None] * len(keys)
        return found, keys_to_read(found, self.complete, [len(key) > self.longest_key for key in keys])

    def remember(self, records: Iterable[tuple[bytes, bytes]]) -> None:
        """Keep (key, record) pairs as the store now holds them (written by this task, or read
        from it)."""
        longest = self.longest_key
        self.txn.cursor(db=self.entries).putmulti([item for item in records if len(item[0]) <= longest])

    def distrust(self, keys: Iterable[bytes]) -> None:
        """Keep no record of `keys`: each is read again at the next batch. A complete file stops
        being complete (absent from it would no longer mean absent from the store)."""
        longest = self.longest_key
        keys = [key for key in keys if len(key) <= longest]  # longer ones are never kept
        if not keys:
            return
        if self.complete:
            self.complete = False
            self.txn.put(b"complete", b"0", db=self.meta)
        for key in keys:
            self.txn.delete(key, db=self.entries)

    def forget_below(self, bound: bytes) -> int:
        """Drop every entry whose key sorts before `bound` (bytewise); returns how many went.
        Window stores' keys start with the window's start (statestore.stream.apply_windows), so
        the windows a stream has closed are one prefix of the file, forgotten in one pass."""
        cursor = self.txn.cursor(db=self.entries)
        dropped = 0
        while cursor.first() and cursor.key() < bound:
            cursor.delete()
            dropped += 1
        return dropped

    def finish(self) -> str:
        """After every write of the task reached Cassandra: a new token, committed with the
        entries. Returns it, for the driver's ledger."""
        token = uuid.uuid4().hex
        self.txn.put(b"token", token.encode(), db=self.meta)
        self.txn.commit()
        self.txn = None
        return token

    def close(self) -> None:
        if self.txn is not None:
            self.txn.abort()
            self.txn = None
        self.env.close()
