"""A partitioned versioned store with sub-partitions: PRIMARY KEY ((partition, subpartition), key, valid_to).

As statestore.store.tables.subpartitioned_kv for the key-value type: each store partition is
spread over `spec.subpartitions` Cassandra partitions by a hash of the key independent of the
partition's (core.partitioner.subpartition_for), so a store that keeps every version of its
keys stays in partitions about 1/N the size. A key's versions stay together in one Cassandra
partition (newest first), so a get, a history and a change's single-partition batch are as in
PartitionedVersionedTable; scans read every (partition, sub-partition) and merge in key order.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from cassandra.concurrent import execute_concurrent

from statestore.core.model import EVERYTHING, Entry, KeyRange
from statestore.core.options import TableOptions
from statestore.store.tables.base import chunked, range_condition
from statestore.store.tables.paging import merge_in_order, paged
from statestore.store.tables.partitioned_versioned import PartitionedVersionedTable
from statestore.store.tables.splits import Split, partition_splits
from statestore.store.tables.subpartitions import PARTITION_WHERE, Location, SubpartitionedLayout
from statestore.store.tables.versioned_base import COLUMNS, OPEN_END, version_from_row

_READ_KEYS = 100
_WHERE = PARTITION_WHERE


class SubpartitionedVersionedTable(SubpartitionedLayout, PartitionedVersionedTable):
    """partitioned-versioned with `spec.subpartitions` Cassandra partitions per store partition."""

    def create_cql(self, options: TableOptions | None = None) -> str:
        options = options or self.default_options()
        return (
            f"CREATE TABLE IF NOT EXISTS {self.qualified} ("
            " partition int, subpartition int, key blob, valid_to bigint, valid_from bigint, value blob,"
            " batch_id bigint, time timestamp, PRIMARY KEY ((partition, subpartition), key, valid_to))"
            " WITH CLUSTERING ORDER BY (key ASC, valid_to DESC)"
            f" AND {options.cql(f'statestore partitioned-versioned store {self.spec.name}')}"
        )

    def _key_where(self) -> str:
        return f"{_WHERE} AND key = ?"

    def _key_params(self, key: bytes) -> tuple:
        return (*self.partition_key_of(key), key)

    def _group_key(self, key: bytes):
        return self.partition_key_of(key)

    def _insert_cql(self, using: str) -> str:
        return (
            f"INSERT INTO {self.qualified} (partition, subpartition, key, valid_to, valid_from, value, batch_id, time)"
            f" VALUES (?, ?, ?, ?, ?, ?, ?, ?){using}"
        )

    def _current_queries(self, session, keys):
        select = self._statement(
            session, f"SELECT {COLUMNS} FROM {self.qualified} WHERE {_WHERE} AND key IN ? AND valid_to = ?"
        )
        groups: dict[Location, list[bytes]] = defaultdict(list)
        for key in keys:
            groups[self.partition_key_of(key)].append(key)
        return [
            (select, (*location, chunk, OPEN_END))
            for location, group in groups.items()
            for chunk in chunked(group, _READ_KEYS)
        ]

    def _current_rows(self, session, location: Location, key_range: KeyRange, reverse: bool, page_size: int):
        condition, params = range_condition(key_range)
        order = " ORDER BY key DESC" if reverse else ""
        select = self._statement(
            session,
            f"SELECT {COLUMNS} FROM {self.qualified} WHERE {_WHERE}{condition} AND valid_to = ?{order} ALLOW FILTERING",
        )
        rows = paged(session, select, (*location, *params, OPEN_END), page_size, self.profile)
        return (version_from_row(row).entry() for row in rows if row.value is not None)

    def scan(self, session, key_range=EVERYTHING, reverse=False, page_size=5000) -> Iterator[Entry]:
        """Current values in key order over every Cassandra partition, read concurrently and merged."""
        page = max(100, page_size // self.spec.subpartitions)
        streams = [
            self._current_rows(session, location, key_range, reverse, page) for location in self.partition_keys()
        ]
        return merge_in_order(streams, key=_key, reverse=reverse)

    def scan_unordered(self, session, after=None, page_size=5000) -> Iterator[Entry]:
        locations = self.partition_keys()
        start = 0 if after is None else locations.index(self.partition_key_of(after))
        for index in range(start, len(locations)):
            key_range = KeyRange(after, None, False) if (after is not None and index == start) else EVERYTHING
            yield from self._current_rows(session, locations[index], key_range, False, page_size)

    def count(self, session) -> int:
        """Keys whose current version is not a tombstone (COUNT of non-null values)."""
        select = self._statement(
            session,
            f"SELECT COUNT(value) FROM {self.qualified} WHERE {_WHERE} AND valid_to = ? ALLOW FILTERING",
        )
        results = execute_concurrent(
            session,
            execution_profile=self.profile,
            statements_and_parameters=[(select, (*location, OPEN_END)) for location in self.partition_keys()],
            concurrency=8,
            raise_on_first_error=True,
        )
        return sum(result.result_or_exc.one()[0] for result in results)

    def sample_rows(self, session, limit: int) -> list:
        select = self._statement(session, f"SELECT {COLUMNS} FROM {self.qualified} WHERE {_WHERE} LIMIT ?")
        rows: list = []
        for location in self.partition_keys():
            if len(rows) >= limit:
                break
            rows += list(session.execute(select, (*location, limit - len(rows)), execution_profile=self.profile))
        return [version_from_row(r) for r in rows]

    def splits(self, count: int, key_range: KeyRange = EVERYTHING, keys=None) -> list[Split]:
        home = self.partition_key_of
        locations = self.partition_keys() if keys is None else sorted(set(map(home, keys)))
        return partition_splits(locations, count, key_range, keys, home)

    def _split_rows(self, session, split, valid_to_above, page_size):
        condition, params = range_condition(split.key_range)
        if valid_to_above is not None:
            condition, params = f"{condition} AND valid_to > ? ALLOW FILTERING", (*params, valid_to_above)
        select = self._statement(session, f"SELECT {COLUMNS} FROM {self.qualified} WHERE {_WHERE}{condition}")
        return (
            row
            for location in split.partitions
            for row in paged(session, select, (*location, *params), page_size, self.profile)
        )


def _key(entry: Entry) -> bytes:
    return entry.key
