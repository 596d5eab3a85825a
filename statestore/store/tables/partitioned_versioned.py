"""The partitioned versioned store: PRIMARY KEY ((partition), key, valid_to).

Like partitioned-kv, a key's partition is Kafka's default partitioner on its bytes, so any
key is found with one query, and keys are stored in order: range and prefix scans work.
Every version of a key sits next to the others, newest first (valid_to descending), so the
current version and the version valid at a time are each one query. Scans of current values
filter on valid_to inside Cassandra (ALLOW FILTERING within one store partition): only
current versions cross the network, but Cassandra reads the history it skips, so prune old
versions (delete_versions) when partitions grow.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from cassandra.concurrent import execute_concurrent

from statestore.core.model import EVERYTHING, Entry, KeyRange, Version
from statestore.core.options import TableOptions
from statestore.core.partitioner import partition_for
from statestore.store.tables.base import chunked, range_condition
from statestore.store.tables.paging import count_per_partition, merge_in_order, paged
from statestore.store.tables.splits import Split, partition_splits
from statestore.store.tables.versioned_base import COLUMNS, OPEN_END, VersionedTable, version_from_row

_READ_KEYS = 100


class PartitionedVersionedTable(VersionedTable):
    def create_cql(self, options: TableOptions | None = None) -> str:
        options = options or self.default_options()
        return (
            f"CREATE TABLE IF NOT EXISTS {self.qualified} ("
            " partition int, key blob, valid_to bigint, valid_from bigint, value blob, batch_id bigint,"
            " time timestamp, PRIMARY KEY ((partition), key, valid_to))"
            " WITH CLUSTERING ORDER BY (key ASC, valid_to DESC)"
            f" AND {options.cql(f'statestore partitioned-versioned store {self.spec.name}')}"
        )

    def partition_of(self, key: bytes) -> int:
        return partition_for(key, self.spec.partitions)

    def _key_where(self) -> str:
        return "partition = ? AND key = ?"

    def _key_params(self, key: bytes) -> tuple:
        return (self.partition_of(key), key)

    def _group_key(self, key: bytes):
        return self.partition_of(key)

    def _insert_cql(self, using: str) -> str:
        return (
            f"INSERT INTO {self.qualified} (partition, key, valid_to, valid_from, value, batch_id, time)"
            f" VALUES (?, ?, ?, ?, ?, ?, ?){using}"
        )

    def _current_queries(self, session, keys):
        """Up to `_READ_KEYS` keys of one store partition per query (key IN ?), like partitioned-kv."""
        select = self._statement(
            session,
            f"SELECT {COLUMNS} FROM {self.qualified} WHERE partition = ? AND key IN ? AND valid_to = ?",
        )
        groups: dict[int, list[bytes]] = defaultdict(list)
        for key in keys:
            groups[self.partition_of(key)].append(key)
        return [
            (select, (partition, chunk, OPEN_END))
            for partition, group in groups.items()
            for chunk in chunked(group, _READ_KEYS)
        ]

    def _current_rows(self, session, partition: int, key_range: KeyRange, reverse: bool, page_size: int):
        condition, params = range_condition(key_range)
        order = " ORDER BY key DESC" if reverse else ""
        select = self._statement(
            session,
            f"SELECT {COLUMNS} FROM {self.qualified} WHERE partition = ?{condition} AND valid_to = ?{order}"
            " ALLOW FILTERING",
        )
        rows = paged(session, select, (partition, *params, OPEN_END), page_size, self.profile)
        return (version_from_row(row).entry() for row in rows if row.value is not None)

    def scan(self, session, key_range=EVERYTHING, reverse=False, page_size=5000) -> Iterator[Entry]:
        """Current values in key order over all store partitions, read concurrently and merged."""
        streams = [
            self._current_rows(session, partition, key_range, reverse, page_size)
            for partition in range(self.spec.partitions)
        ]
        return merge_in_order(streams, key=_key, reverse=reverse)

    def scan_unordered(self, session, after=None, page_size=5000) -> Iterator[Entry]:
        start = 0 if after is None else self.partition_of(after)
        for partition in range(start, self.spec.partitions):
            key_range = KeyRange(after, None, False) if (after is not None and partition == start) else EVERYTHING
            yield from self._current_rows(session, partition, key_range, False, page_size)

    def count(self, session) -> int:
        """Keys whose current version is not a tombstone (COUNT of non-null values)."""
        select = self._statement(
            session,
            f"SELECT COUNT(value) FROM {self.qualified} WHERE partition = ? AND valid_to = ? ALLOW FILTERING",
        )
        results = execute_concurrent(
            session,
            execution_profile=self.profile,
            statements_and_parameters=[(select, (p, OPEN_END)) for p in range(self.spec.partitions)],
            concurrency=8,
            raise_on_first_error=True,
        )
        return sum(result.result_or_exc.one()[0] for result in results)

    def sample_rows(self, session, limit: int) -> list:
        """Up to `limit` stored rows, every version (for size estimates)."""
        select = self._statement(session, f"SELECT {COLUMNS} FROM {self.qualified} WHERE partition = ? LIMIT ?")
        rows: list = []
        for partition in range(self.spec.partitions):
            if len(rows) >= limit:
                break
            rows += list(session.execute(select, (partition, limit - len(rows)), execution_profile=self.profile))
        return [version_from_row(r) for r in rows]

    def splits(self, count: int, key_range: KeyRange = EVERYTHING, keys=None) -> list[Split]:
        """The store's Cassandra partitions in at most `count` splits; with `keys`, only theirs."""
        home = self.partition_key_of
        partitions = [(p,) for p in range(self.spec.partitions)] if keys is None else sorted(set(map(home, keys)))
        return partition_splits(partitions, count, key_range, keys, home)

    def partition_key_of(self, key: bytes) -> tuple[int]:
        """The values of the Cassandra partition key `key` lives under."""
        return (self.partition_of(key),)

    def _split_rows(self, session, split, valid_to_above, page_size):
        condition, params = range_condition(split.key_range)
        if valid_to_above is not None:
            condition, params = f"{condition} AND valid_to > ? ALLOW FILTERING", (*params, valid_to_above)
        select = self._statement(session, f"SELECT {COLUMNS} FROM {self.qualified} WHERE partition = ?{condition}")
        return (
            row
            for (partition,) in split.partitions
            for row in paged(session, select, (partition, *params), page_size, self.profile)
        )

    # -- every stored version row, as it is (a re-layout's copy, statestore.store.relayout) ----
    # A layout with a wider Cassandra partition key overrides these two.
    PARTITION_WHERE = "partition = ?"

    def partition_keys(self) -> list[tuple[int, ...]]:
        """The partition key values of every Cassandra partition of the store."""
        return [(p,) for p in range(self.spec.partitions)]

    def scan_versions(self, session, page_size: int = 5000) -> Iterator[Version]:
        """Every stored version row, tombstone versions and old history too, Cassandra
        partition by partition (each key's versions together, newest first)."""
        select = self._statement(session, f"SELECT {COLUMNS} FROM {self.qualified} WHERE {self.PARTITION_WHERE}")
        for location in self.partition_keys():
            yield from map(version_from_row, paged(session, select, location, page_size, self.profile))

    def count_versions(self, session) -> int:
        """The exact number of stored version rows: one COUNT(*) per Cassandra partition, or
        page by page where one outlasts a request's timeout (as PartitionedKeyValueTable.count)."""
        count = self._statement(session, f"SELECT COUNT(*) FROM {self.qualified} WHERE {self.PARTITION_WHERE}")
        keys = self._statement(session, f"SELECT key FROM {self.qualified} WHERE {self.PARTITION_WHERE}")
        return sum(count_per_partition(session, count, keys, self.partition_keys(), self.profile))


def _key(entry: Entry) -> bytes:
    return entry.key
