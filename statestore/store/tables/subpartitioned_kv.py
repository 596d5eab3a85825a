"""A partitioned key-value store with sub-partitions: PRIMARY KEY ((partition, subpartition), key).

A partitioned-kv store puts each Kafka partition's keys into one Cassandra partition, which
grows with the store. With `subpartitions` N > 1 each of those is spread over N Cassandra
partitions by a hash of the key independent of the partition's (core.partitioner.
subpartition_for), so the largest partition is about 1/N of the N = 1 layout's. A get still
reads one Cassandra partition; a scan reads all partitions x N and merges them in key order.

The layout is another table shape, not a flag on the old one: a reader that ignores
sub-partitions (the seed library, an older statestore) gets a CQL error (a read restricting
only part of the partition key is refused without ALLOW FILTERING) instead of silently
missing keys. A store with N = 1 keeps the
seed's table exactly (statestore.store.tables.partitioned_kv).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from statestore.conn.cassandra import prepare
from statestore.core.model import EVERYTHING, Entry, KeyRange
from statestore.core.options import TableOptions
from statestore.core.partitioner import locations_for
from statestore.store.tables.base import chunked, entry_from_row, range_condition, write_batches
from statestore.store.tables.base import unset_if_none as _time
from statestore.store.tables.paging import count_per_partition, merge_in_order, paged
from statestore.store.tables.partitioned_kv import PartitionedKeyValueTable
from statestore.store.tables.subpartitions import PARTITION_WHERE, Location, SubpartitionedLayout
from statestore.store.tables.unlogged import write_unlogged

_BATCH_ROWS = 64
_READ_KEYS = 100
# The Cassandra partition key of every statement here.
_WHERE = PARTITION_WHERE


class SubpartitionedKeyValueTable(SubpartitionedLayout, PartitionedKeyValueTable):
    """partitioned-kv with `spec.subpartitions` Cassandra partitions per store partition."""

    def create_cql(self, options: TableOptions | None = None) -> str:
        options = options or self.default_options()
        return (
            f"CREATE TABLE IF NOT EXISTS {self.qualified} ("
            " partition int, subpartition int, key blob, value blob, time timestamp, batch_id bigint,"
            " PRIMARY KEY ((partition, subpartition), key))"
            f" WITH {options.cql(f'statestore partitioned-kv store {self.spec.name}')}"
        )

    def _by_location(self, items) -> dict[Location, list]:
        """`items` (keys, or entries) grouped by their key's Cassandra partition, in order."""
        groups: dict[Location, list] = defaultdict(list)
        keys = [item if isinstance(item, bytes) else item.key for item in items]
        for location, item in zip(
            locations_for(keys, self.spec.partitions, self.spec.subpartitions), items, strict=True
        ):
            groups[location].append(item)
        return groups

    def _statement(self, session, cql: str):
        statement = prepare(session, cql)
        statement.is_idempotent = True
        return statement

    def get_many_queries(self, session, keys):
        select = self._statement(
            session, f"SELECT {self._read_columns(self._COLUMNS)} FROM {self.qualified} WHERE {_WHERE} AND key IN ?"
        )
        return [
            (select, (*location, chunk))
            for location, group in self._by_location(keys).items()
            for chunk in chunked(group, _READ_KEYS)
        ]

    def write_entries(self, session, entries, concurrency, write_ts):
        groups = (
            [(*location, e.key, e.value, _time(e), e.batch_id) for e in rows]
            for location, group in self._by_location(entries).items()
            for rows in write_batches(group, _BATCH_ROWS)
        )
        insert = (
            f"INSERT INTO {self.qualified} (partition, subpartition, key, value, time, batch_id)"
            " VALUES (?, ?, ?, ?, ?, ?)"
        )
        write_unlogged(session, self.profile, insert, groups, concurrency, write_ts)

    def get_query(self, session, key):
        select = self._statement(session, f"SELECT {self._COLUMNS} FROM {self.qualified} WHERE {_WHERE} AND key = ?")
        return select, (*self.partition_key_of(key), key)

    def put_if_absent(self, session, entry):
        insert = prepare(
            session,
            f"INSERT INTO {self.qualified} (partition, subpartition, key, value, time, batch_id)"
            " VALUES (?, ?, ?, ?, ?, ?) IF NOT EXISTS",
        )
        row = session.execute(
            insert,
            (*self.partition_key_of(entry.key), entry.key, entry.value, _time(entry), entry.batch_id),
            execution_profile=self.profile,
        ).one()
        return None if row.applied else entry_from_row(row)

    def delete(self, session, key):
        delete = self._statement(session, f"DELETE FROM {self.qualified} WHERE {_WHERE} AND key = ?")
        session.execute(delete, (*self.partition_key_of(key), key), execution_profile=self.profile)

    def scan(self, session, key_range=EVERYTHING, reverse=False, page_size=5000) -> Iterator[Entry]:
        condition, params = range_condition(key_range)
        order = " ORDER BY key DESC" if reverse else ""
        select = self._statement(
            session, f"SELECT {self._COLUMNS} FROM {self.qualified} WHERE {_WHERE}{condition}{order}"
        )
        # Every Cassandra partition's first page is requested now (smaller pages: there are
        # N times as many streams); each is in key order, so a merge gives the store in order.
        page = max(100, page_size // self.spec.subpartitions)
        streams = [
            map(entry_from_row, paged(session, select, (*location, *params), page, self.profile))
            for location in self.partition_keys()
        ]
        return merge_in_order(streams, key=_key, reverse=reverse)

    def scan_unordered(self, session, after=None, page_size=5000) -> Iterator[Entry]:
        locations = self.partition_keys()
        start = 0 if after is None else locations.index(self.partition_key_of(after))
        for index in range(start, len(locations)):
            key_range = KeyRange(after, None, False) if (after is not None and index == start) else KeyRange()
            condition, params = range_condition(key_range)
            select = self._statement(session, f"SELECT {self._COLUMNS} FROM {self.qualified} WHERE {_WHERE}{condition}")
            rows = paged(session, select, (*locations[index], *params), page_size, self.profile)
            yield from map(entry_from_row, rows)

    def count(self, session) -> int:
        return sum(self.count_per_location(session).values())

    def count_per_location(self, session) -> dict[Location, int]:
        """Exact entries of every Cassandra partition (one COUNT(*) each; paged where one
        partition outlasts a request's timeout, as PartitionedKeyValueTable.count)."""
        count = self._statement(session, f"SELECT COUNT(*) FROM {self.qualified} WHERE {_WHERE}")
        keys = self._statement(session, f"SELECT key FROM {self.qualified} WHERE {_WHERE}")
        locations = self.partition_keys()
        return dict(zip(locations, count_per_partition(session, count, keys, locations, self.profile), strict=True))


def _key(entry: Entry) -> bytes:
    return entry.key
