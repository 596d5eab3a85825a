"""The global key-value store: PRIMARY KEY (key).

Every key is its own Cassandra partition, so no partition grows with the store (the layout
to pick when a partitioned store's partitions get too large). The price: scans come back in
token order, so a sorted scan sorts, spilling to disk past `_SORT_CHUNK` entries.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from cassandra.concurrent import execute_concurrent

from statestore.conn.cassandra import prepare
from statestore.core.errors import UnsupportedOperationError
from statestore.core.model import EVERYTHING, Entry, KeyRange
from statestore.core.options import TableOptions
from statestore.core.sorting import external_sort
from statestore.store.tables.base import KeyValueTable, chunked, entry_from_row, write_batches
from statestore.store.tables.base import unset_if_none as _time
from statestore.store.tables.paging import paged
from statestore.store.tables.splits import Split, ring_splits, wanted_keys
from statestore.store.tables.unlogged import write_unlogged

_SORT_CHUNK = 200_000
_READ_KEYS = 100
# Keys per write batch: one request for several keys instead of one each (the client's and the
# coordinator's cost per request dominated this store's apply); under Cassandra's default
# unlogged_batch_across_partitions_warn_threshold (10), so no batch draws a warning, and a power
# of two, so a full batch is one prepared statement (10 would be cut into 8 + 2).
_BATCH_KEYS = 8
# The Murmur3 token ring, split into this many ranges for a parallel exact count.
_COUNT_SPLITS = 64
_TOKEN_MIN, _TOKEN_MAX = -(2**63), 2**63 - 1


class GlobalKeyValueTable(KeyValueTable):
    _COLUMNS = "key, value, batch_id, time"

    def create_cql(self, options: TableOptions | None = None) -> str:
        options = options or self.default_options()
        return (
            f"CREATE TABLE IF NOT EXISTS {self.qualified} ("
            " key blob PRIMARY KEY, value blob, time timestamp, batch_id bigint)"
            f" WITH {options.cql(f'statestore global-kv store {self.spec.name}')}"
        )

    def _select_one(self, session):
        select = prepare(session, f"SELECT {self._COLUMNS} FROM {self.qualified} WHERE key = ?")
        select.is_idempotent = True
        return select

    def _by_first_replica(self, session, entries) -> dict:
        """Entries grouped by the first replica of their key's token: a batch goes to one
        coordinator (token-aware routing follows its first key), which then holds every key of
        it instead of forwarding each to another node."""
        metadata = session.cluster.metadata
        groups: dict = defaultdict(list)
        for entry in entries:
            replicas = metadata.get_replicas(self.spec.keyspace, entry.key)
            groups[replicas[0] if replicas else None].append(entry)
        return groups

    def write_entries(self, session, entries, concurrency, write_ts):
        groups = (
            [(e.key, e.value, _time(e), e.batch_id) for e in rows]
            for group in self._by_first_replica(session, entries).values()
            for rows in write_batches(group, _BATCH_KEYS)
        )
        insert = f"INSERT INTO {self.qualified} (key, value, time, batch_id) VALUES (?, ?, ?, ?)"
        write_unlogged(session, self.profile, insert, groups, concurrency, write_ts)

    def get_query(self, session, key):
        return self._select_one(session), (key,)

    def get_many_queries(self, session, keys):
        # Chunks of keys: on several nodes the coordinator asks each key's replicas, and a
        # small chunk bounds that fan-out.
        select = prepare(session, f"SELECT {self._read_columns(self._COLUMNS)} FROM {self.qualified} WHERE key IN ?")
        select.is_idempotent = True
        return [(select, (chunk,)) for chunk in chunked(keys, _READ_KEYS)]

    def get(self, session, key):
        row = session.execute(*self.get_query(session, key), execution_profile=self.profile).one()
        return None if row is None else entry_from_row(row)

    def put_if_absent(self, session, entry):
        insert = prepare(
            session, f"INSERT INTO {self.qualified} (key, value, time, batch_id) VALUES (?, ?, ?, ?) IF NOT EXISTS"
        )
        row = session.execute(
            insert, (entry.key, entry.value, _time(entry), entry.batch_id), execution_profile=self.profile
        ).one()
        return None if row.applied else entry_from_row(row)

    def delete(self, session, key):
        delete = prepare(session, f"DELETE FROM {self.qualified} WHERE key = ?")
        delete.is_idempotent = True
        session.execute(delete, (key,), execution_profile=self.profile)

    def scan(self, session, key_range=EVERYTHING, reverse=False, page_size=5000) -> Iterator[Entry]:
        """Only the whole store: keys are spread over the ring by hash, so a key range or a
        prefix would read every entry. The whole store is sorted here, spilling to disk past
        `_SORT_CHUNK` entries."""
        if key_range != EVERYTHING:
            raise UnsupportedOperationError(
                f"store '{self.spec.name}' is a global-kv store: its keys are spread by hash, so range and "
                "prefix scans would read the whole table. Use all() / reverse_all() and filter, or a "
                "partitioned-kv store, whose keys are stored in order"
            )
        return external_sort(self.scan_unordered(session, None, page_size), _key, _SORT_CHUNK, reverse)

    def scan_unordered(self, session, after=None, page_size=5000) -> Iterator[Entry]:
        if after is None:
            select = prepare(session, f"SELECT {self._COLUMNS} FROM {self.qualified}")
            params: tuple = ()
        else:
            select = prepare(session, f"SELECT {self._COLUMNS} FROM {self.qualified} WHERE token(key) > token(?)")
            params = (after,)
        select.is_idempotent = True
        return map(entry_from_row, paged(session, select, params, page_size, self.profile))

    def count(self, session) -> int:
        select = prepare(session, f"SELECT COUNT(*) FROM {self.qualified} WHERE token(key) >= ? AND token(key) <= ?")
        select.is_idempotent = True
        return sum(
            result.result_or_exc.one()[0]
            for result in execute_concurrent(
                session,
                [(select, bounds) for bounds in token_splits(_COUNT_SPLITS)],
                concurrency=8,
                execution_profile=self.profile,
                raise_on_first_error=True,
            )
        )

    def splits(self, count: int, key_range: KeyRange = EVERYTHING, keys=None) -> list[Split]:
        """`count` token ranges of the ring, or with `keys` one split of just those."""
        return ring_splits(token_splits(count), key_range, keys)

    def read_split(self, session, split: Split, page_size: int = 5000) -> Iterator[Entry]:
        """The entries of `split`: its keys, or its token ranges' (its key range checked here)."""
        keys = wanted_keys(split)
        if keys is not None:
            return iter(self.read_entries(session, keys, 8).values())
        select = prepare(
            session, f"SELECT {self._COLUMNS} FROM {self.qualified} WHERE token(key) >= ? AND token(key) <= ?"
        )
        select.is_idempotent = True
        entries = (
            entry_from_row(row)
            for bounds in split.token_ranges
            for row in paged(session, select, bounds, page_size, self.profile)
        )
        return entries if split.key_range == EVERYTHING else (e for e in entries if split.key_range.contains(e.key))


def token_splits(count: int) -> list[tuple[int, int]]:
    """`count` contiguous, inclusive token ranges that cover the Murmur3 ring exactly."""
    width = (_TOKEN_MAX - _TOKEN_MIN) // count
    bounds = [_TOKEN_MIN + i * width for i in range(count)] + [_TOKEN_MAX + 1]
    return [(bounds[i], bounds[i + 1] - 1) for i in range(count)]


def _key(entry: Entry) -> bytes:
    return entry.key
