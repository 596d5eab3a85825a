"""The global key-value store: PRIMARY KEY (key).

Every key is its own Cassandra partition, so no partition grows with the store (the layout
to pick when a partitioned store's partitions get too large). The price: scans come back in
token order, so a sorted scan sorts, spilling to disk past `_SORT_CHUNK` entries.
"""

from __future__ import annotations

from collections.abc import Iterator

from cassandra.concurrent import execute_concurrent

from statestore.cassandra import prepare
from statestore.sorting import external_sort
from statestore.stores.base import DEFAULT_COMPACTION, Entry, KeyValueTable, entry_from_row
from statestore.stores.base import unset_if_none as _time

_SORT_CHUNK = 200_000


class GlobalKeyValueTable(KeyValueTable):
    def create_cql(self) -> str:
        return (
            f"CREATE TABLE IF NOT EXISTS {self.qualified} ("
            " key blob PRIMARY KEY, value blob, time timestamp, batch_id bigint)"
            f" WITH compaction = {{'class': '{DEFAULT_COMPACTION}'}}"
            f" AND comment = 'statestore global-kv store {self.spec.name}'"
        )

    def _select_one(self, session):
        select = prepare(session, f"SELECT key, value, batch_id, time FROM {self.qualified} WHERE key = ?")
        select.is_idempotent = True
        return select

    def read_entries(self, session, keys, concurrency):
        select = self._select_one(session)
        found: dict[bytes, Entry] = {}
        work = ((select, (key,)) for key in keys)
        for result in execute_concurrent(session, work, concurrency=concurrency, results_generator=True):
            for row in result.result_or_exc:
                found[row.key] = entry_from_row(row)
        return found

    def write_entries(self, session, entries, concurrency, write_ts):
        upsert = prepare(
            session,
            f"INSERT INTO {self.qualified} (key, value, time, batch_id) VALUES (?, ?, ?, ?) USING TIMESTAMP ?",
        )
        upsert.is_idempotent = True
        work = ((upsert, (e.key, e.value, _time(e), e.batch_id, write_ts)) for e in entries)
        execute_concurrent(session, work, concurrency=concurrency, raise_on_first_error=True)

    def get(self, session, key):
        row = session.execute(self._select_one(session), (key,)).one()
        return None if row is None else entry_from_row(row)

    def scan_sorted(self, session, page_size=5000) -> Iterator[Entry]:
        select = prepare(session, f"SELECT key, value, batch_id, time FROM {self.qualified}")
        select.fetch_size = page_size
        rows = (entry_from_row(row) for row in session.execute(select))
        yield from external_sort(rows, key=lambda e: e.key, chunk_size=_SORT_CHUNK)
