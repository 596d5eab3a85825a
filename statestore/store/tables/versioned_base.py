"""What both versioned store types share: versions, the pure planning of a change, and the
operations built on each type's statements.

A key's versions are rows of one Cassandra partition, clustered by `valid_to` (descending,
so the current version comes first). Each version is valid from `valid_from` (inclusive) to
`valid_to` (exclusive); the current one has `valid_to` = OPEN_END. A null value is a
tombstone version: the key was deleted from `valid_from` on. This follows Kafka Streams'
VersionedKeyValueStore:

- put(key, value, t) lands in the version that contains t. At that version's own valid_from
  it replaces the value; inside it, it splits the version (the old part now ends at t);
  before every version (or in a gap left by dropped versions) it is a new version that ends
  where the next one begins.
- delete(key, t) is a put of a tombstone at t.

A change writes at most two rows (the old part and the new version), both complete rows of
the key's one partition, in one batch: it is atomic. A change never deletes a row, so there
is no delete and insert of one row in a batch (at one write timestamp the delete would win).
Writes read before they write; one writer per store is assumed, as for the word count.
"""

from __future__ import annotations

from abc import abstractmethod
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from itertools import chain, groupby

from cassandra.concurrent import execute_concurrent
from cassandra.query import UNSET_VALUE, BatchStatement, BatchType

from statestore.conn.cassandra import prepare
from statestore.core.errors import UnsupportedOperationError
from statestore.core.model import EVERYTHING, OPEN_END, Version
from statestore.store.tables.base import BATCH_BYTES, EPOCH, MILLISECOND, KeyValueTable, chunked
from statestore.store.tables.paging import paged
from statestore.store.tables.splits import Split, wanted_keys

COLUMNS = "key, valid_to, valid_from, value, batch_id, time"
_BATCH_ROWS = 64
_ROW_OVERHEAD = 48


@dataclass(frozen=True)
class RowWrite:
    """A complete row to write, and the row stored at the same valid_to now (None: a new row)."""

    version: Version
    replaces: Version | None = None


def version_from_row(row) -> Version:
    moment = row.time
    time_ms = None if moment is None else (moment - EPOCH) // MILLISECOND
    return Version(row.key, row.value, row.valid_from, row.valid_to, row.batch_id, time_ms)


def plan_put(
    found: Version | None,
    key: bytes,
    value: bytes | None,
    timestamp: int,
    batch_id: int | None = None,
    time_ms: int | None = None,
) -> tuple[list[RowWrite], Version]:
    """Pure: the rows a put of `value` at `timestamp` writes, and the new version.

    `found` is the key's version with the smallest valid_to above `timestamp` (the version
    containing it, or else the next one), None if there is none.
    """
    if found is None:
        new = Version(key, value, timestamp, OPEN_END, batch_id, time_ms)
        return [RowWrite(new)], new
    if found.valid_from == timestamp:
        new = Version(key, value, timestamp, found.valid_to, batch_id, time_ms)
        return [RowWrite(new, found)], new
    if found.valid_from < timestamp:
        new = Version(key, value, timestamp, found.valid_to, batch_id, time_ms)
        return [RowWrite(replace(found, valid_to=timestamp)), RowWrite(new, found)], new
    new = Version(key, value, timestamp, found.valid_from, batch_id, time_ms)
    return [RowWrite(new)], new


def plan_latest(
    current: Version | None,
    key: bytes,
    value: bytes | None,
    version_ms: int | None,
    batch_id: int | None,
    time_ms: int | None,
) -> list[RowWrite]:
    """Pure: the rows that make `value` the key's current value from `version_ms`.

    A new version starts at `version_ms` only if that is after the current version's start;
    otherwise (or with no `version_ms`) the current version is rewritten in place, so a late
    batch never creates a version in the past. A new key starts at `version_ms`, else at
    `time_ms`, else at 0.
    """
    if current is None:
        start = version_ms if version_ms is not None else (time_ms if time_ms is not None else 0)
        return [RowWrite(Version(key, value, start, OPEN_END, batch_id, time_ms))]
    new = Version(key, value, current.valid_from, OPEN_END, batch_id, time_ms)
    if version_ms is None or version_ms <= current.valid_from:
        return [RowWrite(new, current)]
    return [RowWrite(replace(current, valid_to=version_ms)), RowWrite(replace(new, valid_from=version_ms), current)]


def valid_at(versions: Iterable[Version], at: int) -> Iterator[Version]:
    """Pure: the version valid at `at` of each key, from `versions` grouped by key, each key's
    newest first and none ending at or before `at` (what a slice `valid_to > at` reads)."""
    for _, group in groupby(versions, key=lambda v: v.key):
        oldest = deque(group, maxlen=1)[0]  # the smallest valid_to above `at`
        if oldest.valid_from <= at:
            yield oldest


def _nullable(new, old):
    """A column's bind value: None is left unset on a new row (no tombstone cell), and written
    as null over a row whose column has a value."""
    return UNSET_VALUE if new is None and old is None else new


class VersionedTable(KeyValueTable):
    """A versioned store type's table. Subclasses own the CQL: where a key's versions live
    (`_key_where`, `_key_params`) and the whole-table scans.

    As a KeyValueTable it holds each key's current non-tombstone value, so the word count
    job, the CLI and the HTTP API read it like a key-value table; KV writes rewrite the
    current version in place.
    """

    # -- the key's partition: the only CQL that differs between the two types -------------

    @abstractmethod
    def _key_where(self) -> str:
        """The WHERE condition selecting one key's versions, with placeholders."""

    @abstractmethod
    def _key_params(self, key: bytes) -> tuple:
        """The parameters of `_key_where` for `key`."""

    @abstractmethod
    def _insert_cql(self, using: str) -> str:
        """INSERT of one complete version row; parameters: _key_params + valid_to, valid_from,
        value, batch_id, time (+ the write timestamp with `using`)."""

    @abstractmethod
    def _group_key(self, key: bytes):
        """Keys of one group share a Cassandra partition: their changes may share a batch."""

    @abstractmethod
    def sample_rows(self, session, limit: int) -> list[Version]:
        """Up to `limit` stored rows, every version (for size estimates)."""

    @abstractmethod
    def _split_rows(self, session, split: Split, valid_to_above: int | None, page_size: int) -> Iterator:
        """The rows of `split`'s token ranges or partitions (None: every version, else only
        those with valid_to above it), grouped by key, each key's newest first."""

    def _statement(self, session, cql: str):
        statement = prepare(session, cql)
        statement.is_idempotent = True
        return statement

    # -- versioned operations (raw bytes) ----------------------------------------------------

    def latest_query(self, session, key: bytes):
        """(statement, parameters) reading `key`'s current version: one row at most."""
        select = self._statement(
            session, f"SELECT {COLUMNS} FROM {self.qualified} WHERE {self._key_where()} AND valid_to = ?"
        )
        return select, (*self._key_params(key), OPEN_END)

    def get_latest(self, session, key: bytes) -> Version | None:
        """The current version (a tombstone too), or None."""
        row = session.execute(*self.latest_query(session, key), execution_profile=self.profile).one()
        return None if row is None else version_from_row(row)

    def _first_ending_after(self, session, key: bytes, timestamp: int) -> Version | None:
        select = self._statement(
            session,
            f"SELECT {COLUMNS} FROM {self.qualified} WHERE {self._key_where()} AND valid_to > ?"
            f" {self._ascending()} LIMIT 1",
        )
        row = session.execute(select, (*self._key_params(key), timestamp), execution_profile=self.profile).one()
        return None if row is None else version_from_row(row)

    def _ascending(self) -> str:
        return "ORDER BY valid_to ASC"

    def get_as_of(self, session, key: bytes, as_of_ms: int) -> Version | None:
        """The version valid at `as_of_ms` (a tombstone too), or None: one query."""
        found = self._first_ending_after(session, key, as_of_ms)
        return found if found is not None and found.valid_from <= as_of_ms else None

    def put_version(
        self,
        session,
        key: bytes,
        value: bytes | None,
        timestamp: int,
        batch_id: int | None = None,
        time_ms: int | None = None,
        write_ts: int | None = None,
    ) -> Version:
        """Write `value` (None: a tombstone) as the version from `timestamp`; returns it."""
        found = self._first_ending_after(session, key, timestamp)
        rows, new = plan_put(found, key, value, timestamp, batch_id, time_ms)
        self.write_rows(session, [rows], 1, write_ts)
        return new

    def history(
        self, session, key: bytes, from_ms: int | None = None, to_ms: int | None = None, page_size: int = 1000
    ) -> Iterator[Version]:
        """The versions valid at some time in [from_ms, to_ms), oldest first, paged."""

        condition, params = "", self._key_params(key)
        if from_ms is not None:
            condition, params = " AND valid_to > ?", (*params, from_ms)
        select = self._statement(
            session, f"SELECT {COLUMNS} FROM {self.qualified} WHERE {self._key_where()}{condition} {self._ascending()}"
        )
        for row in paged(session, select, params, page_size, self.profile):
            # Versions do not overlap: ascending valid_to is ascending valid_from.
            if to_ms is not None and row.valid_from >= to_ms:
                return
            yield version_from_row(row)

    def delete_versions(self, session, key: bytes, valid_tos, write_ts: int | None = None) -> None:
        """Drop the versions of `key` ending at `valid_tos` (old history), in one batch."""
        valid_tos = sorted(set(valid_tos))
        if not valid_tos:
            return
        using = " USING TIMESTAMP ?" if write_ts is not None else ""
        delete = self._statement(
            session, f"DELETE FROM {self.qualified}{using} WHERE {self._key_where()} AND valid_to IN ?"
        )
        stamp = () if write_ts is None else (write_ts,)
        session.execute(delete, (*stamp, *self._key_params(key), valid_tos), execution_profile=self.profile)

    def _current_queries(self, session, keys: list[bytes]):
        """(statement, parameters) reading the current versions of `keys`: one query per key
        here; a layout with many keys per partition can ask for several at once."""
        select = self._statement(
            session, f"SELECT {COLUMNS} FROM {self.qualified} WHERE {self._key_where()} AND valid_to = ?"
        )
        return ((select, (*self._key_params(k), OPEN_END)) for k in keys)

    def read_latest(self, session, keys: list[bytes], concurrency: int) -> dict[bytes, Version]:
        """The current versions (tombstones too) among `keys`."""
        found: dict[bytes, Version] = {}
        for result in execute_concurrent(
            session,
            execution_profile=self.profile,
            statements_and_parameters=self._current_queries(session, keys),
            concurrency=concurrency,
            results_generator=True,
        ):
            for row in result.result_or_exc:
                found[row.key] = version_from_row(row)
        return found

    def write_rows(self, session, changes: list[list[RowWrite]], concurrency: int, write_ts: int | None) -> None:
        """Write every change's rows, each change whole within one single-partition batch
        (atomic); changes of keys sharing a partition share batches up to a size limit."""
        using = " USING TIMESTAMP ?" if write_ts is not None else ""
        insert = self._statement(session, self._insert_cql(using))
        stamp = () if write_ts is None else (write_ts,)
        groups: dict[object, list[list[RowWrite]]] = {}
        for change in changes:
            if change:
                groups.setdefault(self._group_key(change[0].version.key), []).append(change)
        work = []
        for group in groups.values():
            batch, rows, size = None, 0, 0
            for change in group:
                if batch is None or size >= BATCH_BYTES or rows >= _BATCH_ROWS:
                    batch = BatchStatement(batch_type=BatchType.UNLOGGED)
                    batch.is_idempotent = True
                    work.append((batch, ()))
                    rows, size = 0, 0
                for write in change:
                    v, old = write.version, write.replaces or Version(b"", None, 0)
                    batch.add(
                        insert,
                        (
                            *self._key_params(v.key),
                            v.valid_to,
                            v.valid_from,
                            _nullable(v.value, old.value),
                            _nullable(v.batch_id, old.batch_id),
                            _nullable(v.time_ms, old.time_ms),
                            *stamp,
                        ),
                    )
                    rows += 1
                    size += len(v.key) + len(v.value or b"") + _ROW_OVERHEAD
        execute_concurrent(
            session,
            execution_profile=self.profile,
            statements_and_parameters=work,
            concurrency=concurrency,
            raise_on_first_error=True,
        )

    def write_versions(self, session, versions: Iterable[Version], concurrency: int, write_ts: int | None) -> None:
        """Write `versions` as they are, each a complete new row (its validity, value or
        tombstone, batch id and time; missing columns left unset): a copy of stored rows."""
        self.write_rows(session, [[RowWrite(version)] for version in versions], concurrency, write_ts)

    def read_split(
        self, session, split: Split, as_of: int | None = None, every_version: bool = False, page_size: int = 5000
    ) -> Iterator[Version]:
        """The versions of `split` (statestore.store.tables.splits): each key's current one, or
        the one valid at `as_of`, deleted keys left out; with `every_version` every version,
        tombstones included."""
        at = OPEN_END - 1 if as_of is None else as_of  # the current version is the one valid at the end
        keys = wanted_keys(split)
        if keys is not None:
            if every_version:
                return chain.from_iterable(self.history(session, key) for key in keys)
            if as_of is None:
                found: Iterable = self.read_latest(session, keys, 8).values()
            else:
                found = filter(None, (self.get_as_of(session, key, as_of) for key in keys))
            return (v for v in found if not v.tombstone)
        rows = map(version_from_row, self._split_rows(session, split, None if every_version else at, page_size))
        if split.key_range != EVERYTHING:
            rows = (v for v in rows if split.key_range.contains(v.key))
        return rows if every_version else (v for v in valid_at(rows, at) if not v.tombstone)

    # -- the KeyValueTable contract: each key's current non-tombstone value --------------------

    def read_entries(self, session, keys, concurrency):
        latest = self.read_latest(session, list(keys), concurrency)
        return {k: v.entry() for k, v in latest.items() if not v.tombstone}

    def write_entries(self, session, entries, concurrency, write_ts):
        """Each entry becomes its key's current value, rewriting the current version in place
        (a new key's version starts at the entry's time, else 0). Reads before it writes."""
        entries = list(entries)
        for chunk in chunked(entries, 1000):
            latest = self.read_latest(session, [e.key for e in chunk], concurrency)
            changes = [plan_latest(latest.get(e.key), e.key, e.value, None, e.batch_id, e.time_ms) for e in chunk]
            self.write_rows(session, changes, concurrency, write_ts)

    def get(self, session, key):
        latest = self.get_latest(session, key)
        return None if latest is None or latest.tombstone else latest.entry()

    def put_if_absent(self, session, entry):
        raise UnsupportedOperationError(
            f"store '{self.spec.name}' is a {self.spec.store_type.value} store: it has no put_if_absent; "
            "use put(key, value, timestamp), which adds a version"
        )

    def delete(self, session, key):
        raise UnsupportedOperationError(
            f"store '{self.spec.name}' is a {self.spec.store_type.value} store: a delete needs a time; "
            "use delete(key, timestamp), which adds a tombstone version"
        )
