"""What the segmented tables (window and session stores) share: PRIMARY KEY ((partition, segment), ...).

A row's partition is Kafka's default partitioner on the key bytes, as in the key-value stores; its
segment is a time of the row (a window's start, a session's end) divided by the store's segment span
(statestore.core.windows). Time in the partition key keeps Cassandra partitions bounded however long
a store runs, and makes expiry cheap: a segment goes with one partition delete per store partition,
no row tombstones and no scan. TimeWindowCompactionStrategy is the default: rows of one segment are
written in one stretch of time, so SSTables of old segments stop changing and expired ones are
dropped whole.

The rule: this module holds the segment arithmetic and the statements every segmented table has in
the same form, parametrised by table (which segments exist, drop one); each table module owns the
rest of its CQL.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from operator import attrgetter

from cassandra.cluster import EXEC_PROFILE_DEFAULT
from cassandra.concurrent import execute_concurrent

from statestore.conn.cassandra import prepare
from statestore.core.model import EVERYTHING, KeyRange, StoreSpec
from statestore.core.options import TableOptions
from statestore.core.partitioner import partition_for, partitions_for
from statestore.store.tables.base import NotesTtl, chunked, range_condition, write_batches
from statestore.store.tables.paging import paged
from statestore.store.tables.splits import Split, partition_splits, wanted_keys
from statestore.store.tables.unlogged import write_unlogged

_BATCH_ROWS = 64  # the most rows of one Cassandra partition in one UNLOGGED batch
_READ_ROWS = 100  # ids per read query: as many as the key-value table's keys per IN list


class SegmentedTable(NotesTtl):
    """The base of PartitionedWindowTable and PartitionedSessionTable. No I/O here."""

    def __init__(self, spec: StoreSpec, profile: object = EXEC_PROFILE_DEFAULT) -> None:
        self.spec = spec
        self.windowing = spec.windowing
        self.qualified = f"{spec.keyspace}.{spec.table}"
        self.profile = profile

    def default_options(self) -> TableOptions:
        """TWCS with one compaction window per segment span (whole minutes, at least one)."""
        minutes = max(1, self.windowing.segment_ms // 60_000)
        return TableOptions(
            compaction="TimeWindowCompactionStrategy",
            compaction_options={"compaction_window_unit": "MINUTES", "compaction_window_size": str(minutes)},
        )

    def partition_of(self, key: bytes) -> int:
        return partition_for(key, self.spec.partitions)

    def _home(self, key: bytes, time_ms: int) -> tuple[int, int]:
        """The (partition, segment) of `key`'s row at `time_ms` (the time the segment is of)."""
        return self.partition_of(key), self.windowing.segment_of(time_ms)

    def _write_by_partition(
        self,
        session,
        insert: str,
        entries: Sequence,
        time_of: Callable[[object], int],
        values_of: Callable[[object], tuple],
        concurrency: int,
        write_ts: int | None,
    ) -> None:
        """Upsert `entries` with `insert` (partition, segment, then `values_of` an entry) in
        prepared UNLOGGED batches, each within one Cassandra partition: the entry's key's store
        partition and the segment of `time_of` it (idempotent, so retries are safe; at
        `write_ts` microseconds, None: the server's clock)."""
        groups: dict[tuple[int, int], list] = defaultdict(list)
        partitions = partitions_for([entry.key for entry in entries], self.spec.partitions)
        for partition, entry in zip(partitions, entries, strict=True):
            groups[(partition, self.windowing.segment_of(time_of(entry)))].append(entry)
        rows_of_batches = (
            [(partition, segment, *values_of(entry)) for entry in rows]
            for (partition, segment), group in groups.items()
            for rows in write_batches(group, _BATCH_ROWS)
        )
        write_unlogged(session, self.profile, insert, rows_of_batches, concurrency, write_ts)

    def _read_rows(self, session, columns: str, clustering: tuple[str, ...], ids: list[tuple], entry_of, concurrency):
        """The stored rows among `ids` (values of the `clustering` columns: the key, then the time
        its segment is of, then any more), each as `entry_of` a row of `columns`; missing ones
        are absent. One query per Cassandra partition and up to _READ_ROWS ids (a multi-column
        IN on the clustering key), not one per key: the stream's apply reads every row it does
        not know. A Found when this table notes TTLs (NotesTtl; `expiring` holds such ids)."""
        select = prepare(
            session,
            f"SELECT {self._read_columns(columns)} FROM {self.qualified}"
            f" WHERE partition = ? AND segment = ? AND ({', '.join(clustering)}) IN ?",
        )
        select.is_idempotent = True
        homes: dict[tuple[int, int], set[tuple]] = defaultdict(set)
        for row_id in ids:
            homes[self._home(row_id[0], row_id[1])].add(row_id)
        work = [
            (select, (partition, segment, chunk))
            for (partition, segment), group in homes.items()
            for chunk in chunked(sorted(group), _READ_ROWS)
        ]
        id_of = attrgetter(*clustering)
        found = self._new_found()
        notes_ttl = self.notes_ttl
        for result in execute_concurrent(
            session, work, concurrency=concurrency, results_generator=True, execution_profile=self.profile
        ):
            for row in result.result_or_exc:
                row_id = id_of(row)
                found[row_id] = entry_of(row)
                if notes_ttl and row.ttl is not None:
                    found.expiring.add(row_id)
        return found

    def segment_span(self, time_from: int, time_to: int) -> tuple[int, int]:
        """The first and last segment holding rows of the entries whose time lies in [time_from,
        time_to]: a reader gives fetch, fetch_range or splits the stored segments in this span
        (a paned window table's reaches further: its windows are made of later panes)."""
        return self.windowing.segment_of(max(0, time_from)), self.windowing.segment_of(time_to)

    def segments(self, session) -> list[int]:
        """The segments that hold rows (or partition tombstones not yet compacted away), in
        order: a scan of the partition keys only."""
        rows = session.execute(
            f"SELECT DISTINCT partition, segment FROM {self.qualified}", execution_profile=self.profile
        )
        return sorted({row.segment for row in rows})

    def has_rows(self, session) -> bool:
        """Whether the table holds any live row (one row asked for, not a scan)."""
        rows = session.execute(f"SELECT partition FROM {self.qualified} LIMIT 1", execution_profile=self.profile)
        return rows.one() is not None

    def drop_segment(self, session, segment: int, concurrency: int = 8) -> None:
        """Delete every row of `segment`: one partition delete per store partition."""
        statement = prepare(session, f"DELETE FROM {self.qualified} WHERE partition = ? AND segment = ?")
        statement.is_idempotent = True
        execute_concurrent(
            session,
            [(statement, (partition, segment)) for partition in range(self.spec.partitions)],
            concurrency=concurrency,
            raise_on_first_error=True,
            execution_profile=self.profile,
        )

    def splits(self, count: int, segments: list[int], key_range: KeyRange = EVERYTHING, keys=None) -> list[Split]:
        """The (partition, segment) Cassandra partitions of `segments` in at most `count` splits;
        with `keys`, only their store partitions' (each split then looks for every key there)."""
        partitions = range(self.spec.partitions) if keys is None else sorted({self.partition_of(k) for k in keys})
        return partition_splits([(p, s) for s in segments for p in partitions], count, key_range, keys)

    # What a split read selects, the time column it bounds and how a row becomes an entry: each
    # segmented table sets them (a window's start, a session's end).
    _SPLIT_COLUMNS: str
    _SPLIT_TIME: str
    _split_entry: Callable

    def _read_split(self, session, split: Split, time_from: int, time_to: int, page_size: int) -> Iterator:
        """The entries of `split` whose time column lies in [time_from, time_to]: its keys' (one
        slice per key and Cassandra partition), or its key range's."""
        columns, moment = self._SPLIT_COLUMNS, self._SPLIT_TIME
        keys = wanted_keys(split)
        if keys is not None:
            select = prepare(
                session,
                f"SELECT {columns} FROM {self.qualified} WHERE partition = ? AND segment = ? AND key = ?"
                f" AND {moment} >= ? AND {moment} <= ?",
            )
            select.is_idempotent = True
            return (
                self._split_entry(row)
                for partition, segment in split.partitions
                for key in keys
                if self.partition_of(key) == partition
                for row in paged(
                    session, select, (partition, segment, key, time_from, time_to), page_size, self.profile
                )
            )
        condition, params = range_condition(split.key_range)
        select = prepare(
            session, f"SELECT {columns} FROM {self.qualified} WHERE partition = ? AND segment = ?{condition}"
        )
        select.is_idempotent = True
        return (
            self._split_entry(row)
            for values in split.partitions
            for row in paged(session, select, (*values, *params), page_size, self.profile)
            # CQL cannot bound the time column after a range on key: bound it here.
            if time_from <= getattr(row, moment) <= time_to
        )
