"""The partitioned key-value store: PRIMARY KEY ((partition), key).

The seed library's default layout. A key's partition is Kafka's default partitioner on the
key bytes (statestore.core.partitioner), so readers find any key with one query. Writes of one
partition go in prepared UNLOGGED single-partition batches (statestore.store.tables.unlogged).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from statestore.conn.cassandra import prepare
from statestore.core.model import EVERYTHING, Entry, KeyRange
from statestore.core.options import TableOptions
from statestore.core.partitioner import partition_for, partitions_for
from statestore.store.tables.base import KeyValueTable, chunked, entry_from_row, range_condition, write_batches
from statestore.store.tables.base import unset_if_none as _time
from statestore.store.tables.paging import count_per_partition, merge_in_order, paged
from statestore.store.tables.splits import Split, partition_splits, wanted_keys
from statestore.store.tables.unlogged import write_unlogged

_BATCH_ROWS = 64
_READ_KEYS = 100


class PartitionedKeyValueTable(KeyValueTable):
    _COLUMNS = "key, value, batch_id, time"

    def create_cql(self, options: TableOptions | None = None) -> str:
        options = options or self.default_options()
        return (
            f"CREATE TABLE IF NOT EXISTS {self.qualified} ("
            " partition int, key blob, value blob, time timestamp, batch_id bigint,"
            " PRIMARY KEY ((partition), key))"
            f" WITH {options.cql(f'statestore partitioned-kv store {self.spec.name}')}"
        )

    def partition_of(self, key: bytes) -> int:
        return partition_for(key, self.spec.partitions)

    def _by_partition(self, items) -> dict[int, list]:
        """`items` (keys, or entries) grouped by their key's partition, in order."""
        groups: dict[int, list] = defaultdict(list)
        keys = [item if isinstance(item, bytes) else item.key for item in items]
        for partition, item in zip(partitions_for(keys, self.spec.partitions), items, strict=True):
            groups[partition].append(item)
        return groups

    def get_many_queries(self, session, keys):
        select = prepare(
            session,
            f"SELECT {self._read_columns(self._COLUMNS)} FROM {self.qualified} WHERE partition = ? AND key IN ?",
        )
        select.is_idempotent = True
        return [
            (select, (partition, chunk))
            for partition, group in self._by_partition(keys).items()
            for chunk in chunked(group, _READ_KEYS)
        ]

    def write_entries(self, session, entries, concurrency, write_ts):
        groups = (
            [(partition, e.key, e.value, _time(e), e.batch_id) for e in rows]
            for partition, group in self._by_partition(entries).items()
            for rows in write_batches(group, _BATCH_ROWS)
        )
        insert = f"INSERT INTO {self.qualified} (partition, key, value, time, batch_id) VALUES (?, ?, ?, ?, ?)"
        write_unlogged(session, self.profile, insert, groups, concurrency, write_ts)

    def get_query(self, session, key):
        select = prepare(
            session,
            f"SELECT {self._COLUMNS} FROM {self.qualified} WHERE partition = ? AND key = ?",
        )
        select.is_idempotent = True
        return select, (self.partition_of(key), key)

    def get(self, session, key):
        row = session.execute(*self.get_query(session, key), execution_profile=self.profile).one()
        return None if row is None else entry_from_row(row)

    def put_if_absent(self, session, entry):
        insert = prepare(
            session,
            f"INSERT INTO {self.qualified} (partition, key, value, time, batch_id) VALUES (?, ?, ?, ?, ?)"
            " IF NOT EXISTS",
        )
        row = session.execute(
            insert,
            (self.partition_of(entry.key), entry.key, entry.value, _time(entry), entry.batch_id),
            execution_profile=self.profile,
        ).one()
        return None if row.applied else entry_from_row(row)

    def delete(self, session, key):
        delete = prepare(session, f"DELETE FROM {self.qualified} WHERE partition = ? AND key = ?")
        delete.is_idempotent = True
        session.execute(delete, (self.partition_of(key), key), execution_profile=self.profile)

    def scan(self, session, key_range=EVERYTHING, reverse=False, page_size=5000) -> Iterator[Entry]:
        condition, params = range_condition(key_range)
        order = " ORDER BY key DESC" if reverse else ""
        select = prepare(
            session,
            f"SELECT {self._COLUMNS} FROM {self.qualified} WHERE partition = ?{condition}{order}",
        )
        select.is_idempotent = True
        # Every partition's first page is requested now; each comes back in key order (the
        # clustering order), so a merge gives the whole store in key order.
        streams = [
            map(entry_from_row, paged(session, select, (partition, *params), page_size, self.profile))
            for partition in range(self.spec.partitions)
        ]
        return merge_in_order(streams, key=_key, reverse=reverse)

    def scan_unordered(self, session, after=None, page_size=5000) -> Iterator[Entry]:
        start = 0 if after is None else self.partition_of(after)
        for partition in range(start, self.spec.partitions):
            key_range = KeyRange(after, None, False) if (after is not None and partition == start) else KeyRange()
            condition, params = range_condition(key_range)
            select = prepare(session, f"SELECT {self._COLUMNS} FROM {self.qualified} WHERE partition = ?{condition}")
            select.is_idempotent = True
            yield from map(entry_from_row, paged(session, select, (partition, *params), page_size, self.profile))

    def count(self, session) -> int:
        count = prepare(session, f"SELECT COUNT(*) FROM {self.qualified} WHERE {self.PARTITION_WHERE}")
        keys = prepare(session, f"SELECT key FROM {self.qualified} WHERE {self.PARTITION_WHERE}")
        count.is_idempotent = keys.is_idempotent = True
        return sum(count_per_partition(session, count, keys, self.partition_keys(), self.profile))

    # -- splits for parallel readers (statestore.store.tables.splits) ---------------------------
    # A layout with a wider Cassandra partition key overrides these three.
    PARTITION_WHERE = "partition = ?"

    def partition_key_of(self, key: bytes) -> tuple[int, ...]:
        """The values of the Cassandra partition key `key` lives under."""
        return (self.partition_of(key),)

    def partition_keys(self) -> list[tuple[int, ...]]:
        """The partition key values of every Cassandra partition of the store."""
        return [(p,) for p in range(self.spec.partitions)]

    def splits(self, count: int, key_range: KeyRange = EVERYTHING, keys=None) -> list[Split]:
        """The store's Cassandra partitions in at most `count` splits; with `keys`, only theirs."""
        partitions = self.partition_keys() if keys is None else sorted(set(map(self.partition_key_of, keys)))
        return partition_splits(partitions, count, key_range, keys, self.partition_key_of)

    def read_split(self, session, split: Split, page_size: int = 5000) -> Iterator[Entry]:
        """The entries of `split`: its keys, or each of its partitions' slice of its key range."""
        keys = wanted_keys(split)
        if keys is not None:
            return iter(self.read_entries(session, keys, 8).values())
        condition, params = range_condition(split.key_range)
        select = prepare(
            session, f"SELECT {self._COLUMNS} FROM {self.qualified} WHERE {self.PARTITION_WHERE}{condition}"
        )
        select.is_idempotent = True
        return (
            entry_from_row(row)
            for values in split.partitions
            for row in paged(session, select, (*values, *params), page_size, self.profile)
        )


def _key(entry: Entry) -> bytes:
    return entry.key
