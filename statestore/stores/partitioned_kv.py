"""The partitioned key-value store: PRIMARY KEY ((partition), key).

The seed library's default layout. A key's partition is Kafka's default partitioner on the
key bytes (statestore.partitioner), so readers find any key with one query. Writes of one
partition go in UNLOGGED single-partition batches: one round trip, applied atomically.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Iterator

from cassandra.concurrent import execute_concurrent
from cassandra.query import BatchStatement, BatchType

from statestore.cassandra import prepare
from statestore.partitioner import partition_for
from statestore.stores.base import (
    DEFAULT_COMPACTION,
    Entry,
    KeyValueTable,
    chunked,
    entry_from_row,
)
from statestore.stores.base import (
    unset_if_none as _time,
)

# Cassandra warns past 5 KiB per batch (batch_size_warn_threshold); stay under it.
_BATCH_BYTES = 4096
_BATCH_ROWS = 64
_READ_KEYS = 100


class PartitionedKeyValueTable(KeyValueTable):
    def create_cql(self) -> str:
        return (
            f"CREATE TABLE IF NOT EXISTS {self.qualified} ("
            " partition int, key blob, value blob, time timestamp, batch_id bigint,"
            " PRIMARY KEY ((partition), key))"
            f" WITH compaction = {{'class': '{DEFAULT_COMPACTION}'}}"
            f" AND comment = 'statestore partitioned-kv store {self.spec.name}'"
        )

    def partition_of(self, key: bytes) -> int:
        return partition_for(key, self.spec.partitions)

    def _by_partition(self, keys) -> dict[int, list]:
        groups: dict[int, list] = defaultdict(list)
        for item in keys:
            groups[self.partition_of(item if isinstance(item, bytes) else item.key)].append(item)
        return groups

    def read_entries(self, session, keys, concurrency):
        select = prepare(
            session,
            f"SELECT key, value, batch_id, time FROM {self.qualified} WHERE partition = ? AND key IN ?",
        )
        select.is_idempotent = True
        work = [
            (select, (partition, chunk))
            for partition, group in self._by_partition(keys).items()
            for chunk in chunked(group, _READ_KEYS)
        ]
        found: dict[bytes, Entry] = {}
        for result in execute_concurrent(session, work, concurrency=concurrency, results_generator=True):
            for row in result.result_or_exc:
                found[row.key] = entry_from_row(row)
        return found

    def write_entries(self, session, entries, concurrency, write_ts):
        upsert = prepare(
            session,
            f"INSERT INTO {self.qualified} (partition, key, value, time, batch_id) VALUES (?, ?, ?, ?, ?)"
            " USING TIMESTAMP ?",
        )
        batches = []
        for partition, group in self._by_partition(entries).items():
            batch, rows, size = None, 0, 0
            for entry in group:
                if batch is None or size >= _BATCH_BYTES or rows >= _BATCH_ROWS:
                    batch = BatchStatement(batch_type=BatchType.UNLOGGED)
                    batch.is_idempotent = True
                    batches.append((batch, ()))
                    rows, size = 0, 0
                batch.add(upsert, (partition, entry.key, entry.value, _time(entry), entry.batch_id, write_ts))
                rows += 1
                size += len(entry.key) + len(entry.value) + 24
        execute_concurrent(session, batches, concurrency=concurrency, raise_on_first_error=True)

    def get(self, session, key):
        select = prepare(
            session,
            f"SELECT key, value, batch_id, time FROM {self.qualified} WHERE partition = ? AND key = ?",
        )
        row = session.execute(select, (self.partition_of(key), key)).one()
        return None if row is None else entry_from_row(row)

    def scan_sorted(self, session, page_size=5000) -> Iterator[Entry]:
        select = prepare(session, f"SELECT key, value, batch_id, time FROM {self.qualified} WHERE partition = ?")
        select.fetch_size = page_size

        def one_partition(partition: int) -> Iterator[Entry]:
            for row in session.execute(select, (partition,)):
                yield entry_from_row(row)

        # Each partition comes back sorted by key (the clustering order): merge them.
        yield from heapq.merge(*(one_partition(p) for p in range(self.spec.partitions)), key=lambda e: e.key)
