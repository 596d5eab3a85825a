"""The apply cache in the simulator (issue 45), for key-value stores: a run with the cache on
or off (--apply-cache / --no-apply-cache), its bucket files, the driver's ledger, and the events
that must make it distrust them.

Where the real cache lives, and so what a restart keeps of it: the ledger (CacheLedger) is the
driver's memory of one run (batches.BatchApplier), and the bucket files are in the working
directories of the run's Spark application (the executors', and the driver's own on a cluster;
one shared directory in local mode), keyed by store, number of buckets and bucket: a restart is
a new application, so it keeps neither. Here both belong to the CachedStreamJob (one run).

What runs for real: the driver's decision of each batch (apply_cache.batch_cache_plan: the TTL
mark to record, CacheLedger.admits and plan, the `fresh` rule), where the batch is applied
(batch_apply.on_driver_for), a task's trust in its file (apply_cache.trust_on_open,
keys_to_read), the cached apply of a task's slice (apply._apply_cached: lookup, read of the
rest, plan_slice, write, remember) and the ledger's record of the tokens the tasks reported
(CacheLedger.record, tokens_by_bucket). FakeBucketFile mirrors BucketCache's LMDB file: opening
empties an untrusted file and clears its token at once, the task's changes are kept only when it
finishes (one write transaction), a task that dies leaves the file without a token.

The events added (CacheProtocolMachine): the next runs' cache setting, number of buckets, local
mode or a cluster (the driver's files its own) and --driver-apply-records; each bucket's task
placed on an executor, its first attempts dying after some of their writes landed (the next
attempt maybe on another executor); an outside writer (the expire job: outside_writes marked
before its deletes and after, or left marked when it dies); a table TTL set or removed between
batches, rows written under it expiring as the clock moves; and a TTL set while a batch writes
and removed before the next (by admin.alter_store, or by CQL alone: only the schema version,
bumped at every change of the TTL, tells the next plan). The base machine's other writers
(paused drivers that go on later, each with its own files and ledger), registry timeouts and
resets apply to these runs too.

The invariant, besides the truth's: whatever a file vouches for (a record it trusts, or a key's
absence from a complete file) plans as what the store holds at that moment (CacheVouchedWrong).
Keys an outside writer deleted or whose row expired leave the truth of counts (the truth knows
nothing of expiry), never the vouching check.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from statestore.conn.cassandra import TableTtl, schema_mark
from statestore.core.model import Entry
from statestore.core.retention import cutoff_ms
from statestore.store.book.registry import BatchPosition, ttl_expiry_to_record
from statestore.stream.apply import ApplyStats, _apply_cached
from statestore.stream.apply_cache import CacheLedger, CachePlan, batch_cache_plan, keys_to_read, trust_on_open
from statestore.stream.batch_apply import on_driver_for
from statestore.stream.plan import entry_of, plan_slice, stored_record
from statestore.stream.transforms import future_limit_ms
from tests.simulation.driver import RunSettings, Step, StreamJob, batch_deltas
from tests.simulation.fake_cassandra import FakeCassandra
from tests.simulation.fake_kafka import Record
from tests.simulation.machine import AFTER_MS, AHEAD_MS, MAX_PARTITIONS, STEP_INDEX, WORDS, BatchProtocolMachine
from tests.simulation.truth import Truth, Violations

EXECUTORS = 2
TTLS_S = (30, 600)  # a table's default TTL: shorter than the clock's moves, or longer
OUTSIDE_EVENTS = 2  # per example: more leave the cache distrusted for most of it
LANDINGS = st.integers(0, 3)  # a task attempt dies after this many of its writes landed

# How an operator sets a table TTL during a batch (TaskFaults.ttl_during).
ALTER_STORE, CQL = "alter-store", "CQL"

# The cache's known bugs (the simulator's name: what leaving it out means). An entry goes once fixed.
CACHE_KNOWN_BUGS: dict[str, str] = {}
# Fixed known bugs whose names --exclude still takes, leaving nothing out (scripts that named them keep working).
CACHE_FIXED_BUGS: dict[str, str] = {
    "drop-after-reset-under-paused-writer": (
        "fixed: a reset that clears a paused driver's unfinished batch records it (registry fenced_batch), "
        "and drop-store is refused while it is recorded unless writer_stopped"
    ),
    "ttl-during-batch": (
        "fixed: a table TTL set by CQL alone during a batch and removed before the next batch's plan "
        "changes the schema versions that plan reads, and CacheLedger.admits then trusts no file"
    ),
}


class CacheVouchedWrong(AssertionError):
    """A task's file vouched for a record (or a key's absence) that the store does not hold."""


@dataclass(frozen=True)
class CacheSettings:
    """A run's apply-cache settings: --apply-cache, the number of buckets (Spark's shuffle
    partitions), a cluster (the driver's files its own) or local mode (one directory), and
    --driver-apply-records."""

    on: bool = False
    buckets: int = 2
    cluster: bool = False
    driver_records: int = 0


@dataclass
class FakeBucketFile:
    """One bucket's file in one working directory (BucketCache's LMDB environment)."""

    entries: dict[bytes, bytes] = field(default_factory=dict)
    token: str | None = None
    complete: bool = False


class OpenedFile:
    """A task's handle on a FakeBucketFile, as BucketCache.open and hold leave it: trusted or
    emptied, its token cleared at once; the task's changes kept only by `finish`. `check` is
    called with what each lookup vouches for."""

    def __init__(self, file: FakeBucketFile, expected: str | None, fresh: bool, check) -> None:
        self.file, self.check = file, check
        self.trusted, self.complete = trust_on_open(file.token, expected, file.complete, fresh)
        if not self.trusted:
            file.entries.clear()
        file.token, file.complete = None, self.complete
        self.staged = dict(file.entries)  # the task's write transaction

    def lookup(self, keys: list[bytes]) -> tuple[list[bytes | None], list[int]]:
        found = [self.staged.get(key) for key in keys] if self.trusted else [None] * len(keys)
        to_read = keys_to_read(found, self.complete, [False] * len(keys))
        self.check(keys, found, to_read)
        return found, to_read

    def remember(self, records) -> None:
        self.staged.update(records)

    def distrust(self, keys) -> None:
        """BucketCache.distrust: no record of `keys` kept, and the file no longer complete."""
        self.complete = False
        for key in keys:
            self.staged.pop(key, None)

    def forget_below(self, bound: bytes) -> int:
        """BucketCache.forget_below: every entry whose key sorts before `bound` dropped."""
        below = [key for key in self.staged if key < bound]
        for key in below:
            del self.staged[key]
        return len(below)

    def finish(self, token: str) -> str:
        self.file.entries, self.file.token, self.file.complete = self.staged, token, self.complete
        return token


@dataclass
class CachedCassandra(FakeCassandra):
    """FakeCassandra with a table TTL (rows written under it expire on the world's clock),
    deletes from outside the stream (tombstones at their time: a write with an older timestamp
    stays shadowed), and the registry's outside_writes and ttl_expiring_until columns."""

    clock_ms: object = None  # a callable: the world's clock
    table_ttl_s: int | None = None  # set by alter_ttl only
    schema_changed: int = 0  # the table's schema row's write time: moved on by every change of the TTL
    expires_at: dict[bytes, int] = field(default_factory=dict)
    tombstones: dict[bytes, int] = field(default_factory=dict)
    changed_outside: set[bytes] = field(default_factory=set)  # keys left out of the truth of counts

    def purge(self) -> None:
        """Rows whose TTL ran out are gone."""
        now = self.clock_ms()
        for key, at in list(self.expires_at.items()):
            if at <= now:
                del self.expires_at[key]
                if self.rows.pop(key, None) is not None:
                    self.changed_outside.add(key)

    def read_entries(self, keys: list[bytes]) -> dict[bytes, Entry]:
        self.purge()
        return super().read_entries(keys)

    def write_entry(self, entry: Entry, write_ts: int, *table) -> None:
        if self.tombstones.get(entry.key, -1) >= write_ts:
            return
        held = self.rows.get(entry.key)
        super().write_entry(entry, write_ts, *table)
        if self.rows.get(entry.key) is not held:
            if self.table_ttl_s:
                self.expires_at[entry.key] = self.clock_ms() + self.table_ttl_s * 1000
            else:
                self.expires_at.pop(entry.key, None)

    def alter_ttl(self, ttl_s: int | None) -> None:
        """ALTER TABLE ... WITH default_time_to_live (by CQL, admin.alter_store or any other
        way): the table's schema row gets a new write time when the TTL changes."""
        if ttl_s != self.table_ttl_s:
            self.table_ttl_s = ttl_s
            self.schema_changed += 1

    def table_ttl(self) -> TableTtl:
        """cassandra.table_ttl_with_schema: the TTL and the schema mark (one node here, so in
        agreement with itself)."""
        return TableTtl(self.table_ttl_s, schema_mark(self.schema_changed, frozenset({"one node"})))

    def record(self, key: bytes) -> bytes | None:
        """The plan's record of what the store holds of `key` now (None: absent)."""
        self.purge()
        row = self.rows.get(key)
        return None if row is None else stored_record(row.entry)

    def delete_outside(self, key: bytes) -> None:
        """A delete by the expire job: `USING TIMESTAMP` of the write time it read of the row
        (statestore.maintenance.expire.entries), so any later batch's write wins over it. Nothing
        when the store does not hold the key (the job only deletes rows it read)."""
        held = self.rows.pop(key, None)
        if held is None:
            return
        self.expires_at.pop(key, None)
        self.tombstones[key] = max(self.tombstones.get(key, -1), held.write_ts)
        self.changed_outside.add(key)

    def mark_outside_writes(self, ongoing: bool, now_us: int) -> None:
        """registry.mark_outside_writes."""
        self.progress_row = replace(self.progress_row, outside_writes=-now_us if ongoing else now_us)

    def record_ttl_expiry(self, until_ms: int) -> None:
        """registry.record_ttl_expiry."""
        self.progress_row = replace(self.progress_row, ttl_expiring_until=until_ms)


def bucket_of(key: bytes, buckets: int) -> int:
    """A key's bucket (Spark's pmod(hash(word), N) in the real apply; any fixed hash will do)."""
    return zlib.crc32(key) % buckets


@dataclass(frozen=True)
class TaskFaults:
    """What befalls a batch's tasks: `seed` places each attempt on an executor and picks the
    task whose first attempts die after `deaths[i]` landings each; `ttl_during`: a table TTL
    set before the batch's first landing and removed after its record, by the library
    (ALTER_STORE: admin.alter_store records the registry's expiry mark first) or by CQL alone
    (CQL: only the schema version changes); None: no TTL set during the batch."""

    seed: int = 0
    deaths: tuple[int, ...] = ()
    ttl_during: str | None = None


class CachedStreamJob(StreamJob):
    """driver.StreamJob whose key-value apply goes through the apply cache when the run has it
    on (see the module doc). One instance is one run: its ledger and files die with it."""

    faults: TaskFaults = TaskFaults()

    def __init__(self, world, settings: RunSettings) -> None:
        super().__init__(world, settings)
        self.cache_settings: CacheSettings = world.cache_settings
        self.ledger = CacheLedger() if self.cache_settings.on else None
        self.files: dict[tuple[str, str, int, int], FakeBucketFile] = {}  # (directory, store, buckets, bucket)
        self.tokens = 0
        self.recovering = False

    @classmethod
    def protocol_faults(cls) -> bool:
        """The lease, paused drivers (zombies: their files and ledger their own) and registry
        timeouts are modelled: this apply's registry calls go through `_retried` too."""
        return True

    def finish_pending_batch(self, write_order: int) -> Iterator[Step]:
        """batches.finish_pending_batch applies without the cache (apply_batch with no plan)."""
        self.recovering = True
        try:
            yield from super().finish_pending_batch(write_order)
        finally:
            self.recovering = False

    def apply_batch(self, records: list[Record], position: BatchPosition, write_order: int) -> Iterator[Step]:
        """BatchApplier.cache_plan (the TTL mark recorded, the plan or none), then
        batch_apply._apply_batch with that plan, then the ledger's record of the batch."""
        cassandra: CachedCassandra = self.cassandra
        progress = cassandra.progress()
        plan = None
        if not self.recovering:
            recorded = None if progress.ttl_expiring_until is None else progress.ttl_expiring_until / 1000
            settings = self.cache_settings
            mark, plan = batch_cache_plan(
                self.ledger,
                f"ks.{cassandra.store}",
                position.batch_id,
                lambda: settings.buckets,
                progress.outside_writes,
                recorded,
                progress.has_batches,
                cassandra.table_ttl(),
                self.world.clock_ms / 1000,
                lambda: not any(cassandra.read_entries(list(cassandra.rows))),
            )
            if mark is not None:
                cassandra.record_ttl_expiry(int(mark * 1000))
        if plan is None:
            yield from super().apply_batch(records, position, write_order)
            return
        reported = yield from self._apply_with(plan, records, position, write_order)
        self.ledger.record(position.batch_id, plan.buckets, progress.outside_writes, reported)

    def _apply_with(
        self, plan: CachePlan, records: list[Record], position: BatchPosition, write_order: int
    ) -> Iterator[Step]:
        """driver.StreamJob.apply_batch with the cache: each bucket's task on the driver
        (on_driver_for) or on an executor, through its file. Returns the tokens reported."""
        cassandra: CachedCassandra = self.cassandra
        max_future = position.max_future_ms
        batch_id, write_ts = position.batch_id, position.write_ts
        limit = future_limit_ms(write_ts, max_future)
        yield from self._retried("registry begin_batch", lambda: cassandra.begin_batch(position, self.epoch))
        yield Step("begin", f"batch {batch_id} begun with the apply cache (limit {limit})", position, max_future)

        deltas, letters = self.cached_batch_of(records, limit, position)
        by_bucket: dict[int, list] = {}
        for delta in deltas:
            bucket = bucket_of(delta.key, plan.buckets)
            by_bucket.setdefault(bucket, []).append(delta._replace(bucket=bucket))
        settings, faults = self.cache_settings, self.faults
        rng = random.Random(faults.seed)
        on_driver = on_driver_for(position.start, position.end, settings.driver_records)
        dying = rng.choice(sorted(by_bucket)) if by_bucket and not on_driver else None
        cutoff = self.cutoff_of(position)
        ttl_before = cassandra.table_ttl_s
        if faults.ttl_during == ALTER_STORE:  # admin.alter_store: the mark first, then the ALTER
            recorded = cassandra.progress().ttl_expiring_until
            now_s = cassandra.clock_ms() / 1000
            mark = ttl_expiry_to_record(TTLS_S[0], now_s, None if recorded is None else recorded / 1000)
            if mark is not None:
                cassandra.record_ttl_expiry(int(mark * 1000))
        if faults.ttl_during:
            cassandra.alter_ttl(TTLS_S[0])
            yield Step(
                "ttl", f"the operator set a table TTL of {TTLS_S[0]} s by {faults.ttl_during} during batch {batch_id}"
            )
        reported: list[tuple[int, str]] = []
        max_time: int | None = None
        for bucket, group in sorted(by_bucket.items()):
            deaths = faults.deaths if bucket == dying else ()
            for number, dies_after in enumerate((*deaths, None), 1):
                if on_driver:
                    directory = "driver" if settings.cluster else "local"
                else:
                    directory = f"executor-{rng.randrange(EXECUTORS)}" if settings.cluster else "local"
                file = self.files.setdefault((directory, plan.store, plan.buckets, bucket), FakeBucketFile())
                where = f"batch {batch_id} bucket {bucket} attempt {number} on {directory}"
                check = self._checker(where, group, position, cutoff)
                opened = self.opened_file(file, plan.expected.get(bucket), plan.fresh, check, position)
                table = self.capturing_table()
                stats = self.apply_cached(table, group, position, opened, cutoff)
                writes = table.captured
                if write_order:
                    random.Random(write_order).shuffle(writes)
                landings = len(writes) if dies_after is None else min(dies_after, len(writes))
                for landed, entry in enumerate(writes[:landings], 1):
                    self.land_cached(entry, write_ts)
                    what = f"{where}: {self.shown_write(entry)} written ({landed} of {len(writes)})"
                    yield Step("write", what, position, max_future)
                if dies_after is not None:
                    yield Step("write", f"{where} died after {landings} landing(s)", position, max_future)
                    continue
                self.tokens += 1
                reported.append((bucket, opened.finish(f"token-{self.tokens}")))
                if stats.max_time_ms is not None:
                    max_time = stats.max_time_ms if max_time is None else max(max_time, stats.max_time_ms)
                break

        if letters:
            yield from self.letters_written(records, letters, limit, position, max_future)
        yield from self._retried(
            "registry record_batch", lambda: cassandra.record_batch(position, max_time, self.epoch)
        )
        yield Step("record", f"batch {batch_id} recorded, ending at {position.end.as_json()}", position, max_future)
        if faults.ttl_during:
            cassandra.alter_ttl(ttl_before)
            yield Step("ttl", f"the operator put the table's TTL back ({ttl_before}) after batch {batch_id}")
        return reported

    def cached_batch_of(
        self, records: list[Record], limit_ms: int | None, position: BatchPosition
    ) -> tuple[list, object]:
        """The batch's deltas as the cached apply takes them (each with a `key`, `_replace`d
        with its bucket), and its dead letters (any true value: there are some): driver.batch_deltas'
        words and their uncountable count."""
        return batch_deltas(records, limit_ms)

    def cutoff_of(self, position: BatchPosition) -> int | None:
        """The retention cutoff the cached apply plans with (the key-value rule)."""
        return cutoff_ms(position.retention_ms, position.stream_time_ms)

    def opened_file(self, file: FakeBucketFile, expected: str | None, fresh: bool, check, position: BatchPosition):
        """A task attempt's handle on its bucket's file (BucketCache's open: trusted or emptied)."""
        return OpenedFile(file, expected, fresh, check)

    def capturing_table(self):
        """The table one attempt's cached apply reads and writes through, its writes kept in
        `captured` to land one at a time (land_cached)."""
        return _CapturingTable(self.cassandra)

    def apply_cached(self, table, group: list, position: BatchPosition, opened, cutoff: int | None) -> ApplyStats:
        """One task attempt's cached apply of its bucket's deltas through `table` and its file
        `opened` (apply._apply_cached)."""
        batch_id, write_ts, keys = position.batch_id, position.write_ts, [d.key for d in group]
        return _apply_cached(None, table, batch_id, group, keys, 1, write_ts, None, opened, cutoff)

    def land_cached(self, entry, write_ts: int) -> None:
        """One of a cached apply's writes lands (`capturing_table`'s captured rows)."""
        self._write_entry(entry, write_ts)

    def shown_write(self, entry) -> str:
        return f"key {entry.key.decode()!r}"

    def shown_key(self, key: bytes) -> str:
        """A cache key as the vouching check names it."""
        return repr(key.decode())

    def known_new(self, key: bytes, position: BatchPosition) -> bool:
        """Whether the cached apply takes `key` as new without reading it, by a rule of its own
        (none for key-value stores): the vouching check holds it to the store's row too."""
        return False

    def letters_written(
        self, records: list[Record], letters, limit: int, position: BatchPosition, max_future: int | None
    ) -> Iterator[Step]:
        """The batch's dead letters written (`letters`: batch_of's)."""
        yield from self.write_dead_letters(records, limit, position, max_future)

    def vouched_wrong(self, key: bytes, found: bytes | None, delta, batch_id: int, cutoff: int | None) -> str | None:
        """How `found`, what a file vouches for of `key` (None: absent), plans otherwise than
        what the store holds now (None: it plans the same). Not the records themselves: at a
        store's first batch, an attempt after one that died finds the file complete and the key
        its predecessor wrote absent, and writes the same entry again."""
        held = self.cassandra.record(key)
        if found == held:
            return None
        vouched_plan = plan_slice([found], [delta], batch_id, cutoff).records
        held_plan = plan_slice([held], [delta], batch_id, cutoff).records
        if vouched_plan == held_plan:
            return None
        return f"the file vouched for {self.shown_key(key)} as {_shown(found)}, the store holds {_shown(held)}"

    def _checker(self, where: str, deltas: list, position: BatchPosition, cutoff: int | None):
        """The check of what a file vouches for (vouched_wrong), for each key it does not send
        to be read, and of each key taken as new by a rule of the apply's own (known_new)."""
        cassandra: CachedCassandra = self.cassandra
        delta_of = {delta.key: delta for delta in deltas}
        batch_id = position.batch_id

        def check(keys: list[bytes], found: list[bytes | None], to_read: list[int]) -> None:
            if cassandra.progress_row.epoch != self.epoch or not cassandra.table_present:
                # A fenced writer (paused past its lease), or a table dropped under it: its writes
                # are shadowed or refused; only what lands counts, which the truth checks.
                return
            read = set(to_read)
            for i, key in enumerate(keys):
                if i in read and not self.known_new(key, position):
                    continue
                wrong = self.vouched_wrong(key, found[i], delta_of[key], batch_id, cutoff)
                if wrong is not None:
                    unread = " (not read: after the stream time)" if i in read else ""
                    raise CacheVouchedWrong(f"{where}: {wrong}{unread}")

        return check


def _shown(record: bytes | None) -> str:
    if record is None:
        return "absent"
    entry = entry_of(b"", record)
    return f"(value {int.from_bytes(entry.value, 'big', signed=True)}, batch {entry.batch_id})"


class _CapturingTable:
    """The table as apply._apply_cached uses it: reads from the fake, writes kept to land one
    at a time (the real ones go out concurrently and land in any order)."""

    def __init__(self, cassandra: CachedCassandra) -> None:
        self.cassandra = cassandra
        self.captured: list[Entry] = []

    def read_entries(self, session, keys: list[bytes], concurrency: int) -> dict[bytes, Entry]:
        return self.cassandra.read_entries(keys)

    def write_entries(self, session, rows: list[Entry], concurrency: int, write_ts: int) -> None:
        self.captured.extend(rows)


class OutsideForgiven:
    """A truth's mixin: its violations but for the counts of keys changed from outside the
    stream (`outside`, the CachedCassandra: see the module doc), named `key 'k':` or `key 'k' (`
    (forgiven_lines)."""

    outside: CachedCassandra

    def violations(self, cassandra: FakeCassandra) -> Violations:
        found = super().violations(cassandra)
        outside = tuple(start for key in self.outside.changed_outside for start in self.forgiven_lines(key))
        counts = [line for line in found.counts if not line.startswith(outside)]
        return replace(found, counts=counts)

    def forgiven_lines(self, key: bytes) -> tuple[str, ...]:
        """How the truth's lines about the row of `key` (the table's) start."""
        return tuple(f"key {key.decode()!r}{end}" for end in (":", " ("))


class CacheTruth(OutsideForgiven, Truth):
    """The truth, but for the counts of keys changed from outside the stream (see the module doc)."""

    def __init__(self, topic, cassandra: CachedCassandra) -> None:
        super().__init__(topic)
        self.outside = cassandra


class CacheProtocolMachine(BatchProtocolMachine):
    """BatchProtocolMachine over a key-value store with the apply cache (see the module doc)."""

    job_class: ClassVar[type[StreamJob]] = CachedStreamJob
    faults_class: ClassVar[type[TaskFaults]] = TaskFaults  # what befalls a batch's tasks, as the job takes it

    def __init__(self) -> None:
        super().__init__()
        world = self.world
        world.cassandra = CachedCassandra(clock_ms=lambda: world.clock_ms)
        world.cache_settings = CacheSettings(on=True)
        self.truth = CacheTruth(world.topic, world.cassandra)
        self.marked_at = 0  # the expire job's marks: distinct times
        self.outside_events = 0

    @rule(partition=st.integers(0, MAX_PARTITIONS - 1), words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
          null=st.booleans(), ahead_ms=st.sampled_from(AHEAD_MS), after_ms=st.sampled_from(AFTER_MS))  # fmt: skip
    def produce(self, partition: int, words: list[str], null: bool, ahead_ms: int, after_ms: int) -> None:
        """BatchProtocolMachine.produce, every record with a word (or none at all): the same
        keys in batch after batch, so files are trusted often."""
        super().produce(partition, words, null, ahead_ms, after_ms)

    @precondition(lambda self: self.job is None)
    @rule(
        on=st.booleans(),
        buckets=st.sampled_from((1, 1, 2, 3)),
        cluster=st.booleans(),
        driver_records=st.sampled_from((0, 2, 5)),
    )
    def cache_settings_of_next_runs(self, on: bool, buckets: int, cluster: bool, driver_records: int) -> None:
        """The settings the next runs start with: --apply-cache or not, the number of buckets
        (spark.sql.shuffle.partitions), a cluster or local mode, --driver-apply-records."""
        self.world.cache_settings = CacheSettings(on, buckets, cluster, driver_records)

    @precondition(lambda self: self.job is not None)
    @rule(crash_at=STEP_INDEX, backup_at=STEP_INDEX, order=st.integers(0, 3), seed=st.integers(0, 7),
          deaths=st.lists(LANDINGS, max_size=2), ttl_during=st.sampled_from((None, CQL, ALTER_STORE)))  # fmt: skip
    def trigger(
        self,
        crash_at: int | None,
        backup_at: int | None,
        order: int,
        seed: int,
        deaths: list[int],
        ttl_during: str | None,
    ) -> None:
        """The query's next micro-batch (as BatchProtocolMachine.trigger); with the cache, its
        tasks placed by `seed`, one task's first attempts dying after `deaths` landings each,
        and (`ttl_during`) a table TTL set during the batch (by admin.alter_store or by CQL alone),
        removed after it."""
        self.job.faults = self.faults_class(seed, tuple(deaths), ttl_during)
        self._run(self.job.trigger(order), crash_at, backup_at)

    @precondition(lambda self: self.job is not None)
    @rule(words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3), seed=st.integers(0, 7))
    def steady_batch(self, words: list[str], seed: int) -> None:
        """A second later a record of `words`, and the batch that reads it, nothing failing:
        the runs of consecutive batches in which a file is trusted."""
        self.produce(0, words, False, 0, 1_000)
        self.job.faults = self.faults_class(seed)
        self._run(self.job.trigger(0), None)

    @precondition(lambda self: self.outside_events < OUTSIDE_EVENTS)
    @rule(word=st.sampled_from(WORDS), finishes=st.booleans(), ttl=st.sampled_from((False, False, None, *TTLS_S)))
    def outside_the_stream(self, word: str, finishes: bool, ttl: bool | int | None) -> None:
        """Something outside the stream, between batches: the expire job (`ttl` False; or any
        program that marks the store's outside_writes as it does) deletes a key, outside_writes
        marked ongoing before and done after (`finishes`; else it died in between and the mark
        stays ongoing until its next run); or an operator sets the table's default TTL to `ttl`
        seconds (None: removes it)."""
        self._outside(word.encode(), finishes, ttl)

    def _outside(self, key: bytes, finishes: bool, ttl: bool | int | None, shown: str | None = None) -> None:
        """outside_the_stream's event, `key` the one the expire job deletes (`shown` so: its text
        unless given)."""
        cassandra: CachedCassandra = self.world.cassandra
        self.outside_events += 1
        if ttl is not False:
            cassandra.alter_ttl(ttl)
            self.steps = [f"table TTL set to {ttl}"]
            return
        self.marked_at = max(self.marked_at + 1, self.world.now_us())
        cassandra.mark_outside_writes(True, self.marked_at)
        cassandra.delete_outside(key)
        self.steps = [f"the expire job marked the store and deleted {shown or repr(key.decode())}"]
        if finishes:
            self.marked_at += 1
            cassandra.mark_outside_writes(False, self.marked_at)
            self.steps.append("the expire job marked its end")

    @precondition(
        lambda self: (
            (until := self.world.cassandra.progress().ttl_expiring_until) is not None and until > self.world.clock_ms
        )
    )
    @rule()
    def hours_pass(self) -> None:
        """The clock moves past the registry's ttl_expiring_until (rows written under a TTL
        can no longer expire), the table's TTL removed: the cache may serve again."""
        cassandra: CachedCassandra = self.world.cassandra
        cassandra.alter_ttl(None)
        self.world.clock_ms = cassandra.progress().ttl_expiring_until + 1

    def _check(self) -> None:
        self.world.cassandra.purge()
        super()._check()


def cache_machine_excluding(
    excluded: frozenset[str], base: type[CacheProtocolMachine] = CacheProtocolMachine
) -> type[CacheProtocolMachine]:
    """machine.machine_excluding for the apply cache's run (its own known bugs: CACHE_KNOWN_BUGS;
    the fixed ones, CACHE_FIXED_BUGS, leave nothing out), over `base`."""
    unknown = excluded - set(CACHE_KNOWN_BUGS) - set(CACHE_FIXED_BUGS)
    if unknown:
        raise ValueError(f"unknown known bugs {sorted(unknown)}: choose among {sorted(CACHE_KNOWN_BUGS)}")
    known = frozenset(excluded & set(CACHE_KNOWN_BUGS))
    if not known:
        return base
    name = f"{base.__name__}Without_" + "_".join(sorted(e.replace("-", "_") for e in known))
    return type(name, (base,), {"excluded": known})
