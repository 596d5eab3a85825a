"""The global versioned store: PRIMARY KEY ((key), valid_to).

Every key is its own Cassandra partition holding its versions, newest first, so no partition
grows with the number of keys (only with one key's history). As with global-kv, keys are
spread by hash: scans of current values come back in token order (PER PARTITION LIMIT 1
reads just each key's newest row), a sorted scan sorts (spilling to disk), and there are no
range or prefix scans.
"""

from __future__ import annotations

from collections.abc import Iterator

from cassandra.concurrent import execute_concurrent

from statestore.core.errors import UnsupportedOperationError
from statestore.core.model import EVERYTHING, Entry, KeyRange
from statestore.core.options import TableOptions
from statestore.core.sorting import external_sort
from statestore.store.tables.global_kv import token_splits
from statestore.store.tables.paging import paged
from statestore.store.tables.splits import Split, ring_splits
from statestore.store.tables.versioned_base import COLUMNS, OPEN_END, VersionedTable, version_from_row

_SORT_CHUNK = 200_000
_COUNT_SPLITS = 64


class GlobalVersionedTable(VersionedTable):
    def create_cql(self, options: TableOptions | None = None) -> str:
        options = options or self.default_options()
        return (
            f"CREATE TABLE IF NOT EXISTS {self.qualified} ("
            " key blob, valid_to bigint, valid_from bigint, value blob, batch_id bigint, time timestamp,"
            " PRIMARY KEY ((key), valid_to))"
            " WITH CLUSTERING ORDER BY (valid_to DESC)"
            f" AND {options.cql(f'statestore global-versioned store {self.spec.name}')}"
        )

    def _key_where(self) -> str:
        return "key = ?"

    def _key_params(self, key: bytes) -> tuple:
        return (key,)

    def _group_key(self, key: bytes):
        return key

    def _insert_cql(self, using: str) -> str:
        return (
            f"INSERT INTO {self.qualified} (key, valid_to, valid_from, value, batch_id, time)"
            f" VALUES (?, ?, ?, ?, ?, ?){using}"
        )

    def scan(self, session, key_range=EVERYTHING, reverse=False, page_size=5000) -> Iterator[Entry]:
        """Only the whole store, sorted here (spilling to disk past `_SORT_CHUNK` entries)."""
        if key_range != EVERYTHING:
            raise UnsupportedOperationError(
                f"store '{self.spec.name}' is a global-versioned store: its keys are spread by hash, so range "
                "and prefix scans would read the whole table. Use all() / reverse_all() and filter, or a "
                "partitioned-versioned store, whose keys are stored in order"
            )
        return external_sort(self.scan_unordered(session, None, page_size), _key, _SORT_CHUNK, reverse)

    def scan_unordered(self, session, after=None, page_size=5000) -> Iterator[Entry]:
        """Current values in token order, continuing after key `after`."""
        if after is None:
            select = self._statement(session, f"SELECT {COLUMNS} FROM {self.qualified} PER PARTITION LIMIT 1")
            params: tuple = ()
        else:
            select = self._statement(
                session,
                f"SELECT {COLUMNS} FROM {self.qualified} WHERE token(key) > token(?) PER PARTITION LIMIT 1",
            )
            params = (after,)
        rows = paged(session, select, params, page_size, self.profile)
        # A key's first row is its current version unless maintenance dropped that one.
        return (version_from_row(row).entry() for row in rows if row.valid_to == OPEN_END and row.value is not None)

    def count(self, session) -> int:
        """Keys whose current version is not a tombstone, counted over token ranges in parallel."""
        select = self._statement(
            session,
            f"SELECT COUNT(value) FROM {self.qualified} WHERE token(key) >= ? AND token(key) <= ? AND valid_to = ?"
            " ALLOW FILTERING",
        )
        results = execute_concurrent(
            session,
            [(select, (*bounds, OPEN_END)) for bounds in token_splits(_COUNT_SPLITS)],
            concurrency=8,
            raise_on_first_error=True,
            execution_profile=self.profile,
        )
        return sum(result.result_or_exc.one()[0] for result in results)

    def sample_rows(self, session, limit: int) -> list:
        """Up to `limit` stored rows, every version (for size estimates)."""
        select = self._statement(session, f"SELECT {COLUMNS} FROM {self.qualified} LIMIT ?")
        return [version_from_row(r) for r in session.execute(select, (limit,), execution_profile=self.profile)]

    def splits(self, count: int, key_range: KeyRange = EVERYTHING, keys=None) -> list[Split]:
        """`count` token ranges of the ring, or with `keys` one split of just those."""
        return ring_splits(token_splits(count), key_range, keys)

    def _split_rows(self, session, split, valid_to_above, page_size):
        where = "token(key) >= ? AND token(key) <= ?"
        if valid_to_above is not None:
            where += " AND valid_to > ? ALLOW FILTERING"
        select = self._statement(session, f"SELECT {COLUMNS} FROM {self.qualified} WHERE {where}")
        extra = () if valid_to_above is None else (valid_to_above,)
        return (
            row
            for bounds in split.token_ranges
            for row in paged(session, select, (*bounds, *extra), page_size, self.profile)
        )


def _key(entry: Entry) -> bytes:
    return entry.key
