"""The vocabulary every wing shares about stores: types, descriptions, entries, versions,
key ranges. Pure: no I/O, nothing of Cassandra, Kafka or Spark."""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from statestore.core.errors import OptionError, ValueTooLargeError
from statestore.core.names import store_table, validate_keyspace, validate_store_name, validate_table_name
from statestore.core.retention import check_retention
from statestore.core.windows import SessionSpec, WindowSpec

# Cassandra refuses keys over 64 KiB - 1 byte (partition and clustering keys alike).
MAX_KEY_BYTES = 65535
# Cassandra's native protocol frames are 256 MiB at most; values far below that are sane.
MAX_VALUE_BYTES = 16 * 1024 * 1024


class StoreType(enum.StrEnum):
    PARTITIONED_KV = "partitioned-kv"
    GLOBAL_KV = "global-kv"
    PARTITIONED_VERSIONED = "partitioned-versioned"
    GLOBAL_VERSIONED = "global-versioned"
    PARTITIONED_WINDOW = "partitioned-window"
    PARTITIONED_SESSION = "partitioned-session"

    @classmethod
    def parse(cls, raw: str) -> StoreType:
        try:
            return cls(raw)
        except ValueError:
            choices = ", ".join(t.value for t in cls)
            raise ValueError(f"unknown store type {raw!r}: use one of {choices}") from None

    @property
    def versioned(self) -> bool:
        return self in (StoreType.PARTITIONED_VERSIONED, StoreType.GLOBAL_VERSIONED)

    @property
    def partitioned(self) -> bool:
        return self is not StoreType.GLOBAL_KV and self is not StoreType.GLOBAL_VERSIONED

    @property
    def windowed(self) -> bool:
        """Keys hold one value per time window (statestore.core.windows), not one value."""
        return self is StoreType.PARTITIONED_WINDOW

    @property
    def sessioned(self) -> bool:
        """Keys hold one value per session (statestore.core.windows.SessionSpec)."""
        return self is StoreType.PARTITIONED_SESSION

    @property
    def timed(self) -> bool:
        """Windows or sessions: values per stretch of event time, kept for a retention."""
        return self.windowed or self.sessioned


@dataclass(frozen=True)
class StoreSpec:
    """A store as registered: name, type, partitions (partitioned types), table and codecs.

    `table` defaults to the store name plus '_store' (statestore.core.names.store_table); the
    codec names are recorded so every reader decodes what the writer encoded.
    """

    keyspace: str
    name: str
    store_type: StoreType
    partitions: int
    table_name: str | None = None
    key_codec: str = "string"
    value_codec: str = "long"
    windowing: WindowSpec | SessionSpec | None = None
    # Cassandra partitions per store partition (partitioned-kv and -versioned): 1 keeps PRIMARY
    # KEY ((partition), key...); N > 1 spreads each store partition over N by a hash of the key.
    subpartitions: int = 1
    # Key-value stores: entries dated more than this before the stream time are absent to every
    # reader and to the stream (statestore.core.retention); None: kept until deleted. Not layout.
    retention_ms: int | None = None

    def __post_init__(self) -> None:
        validate_keyspace(self.keyspace)
        validate_store_name(self.name)
        object.__setattr__(self, "store_type", StoreType.parse(self.store_type))
        if self.store_type.windowed and not isinstance(self.windowing, WindowSpec):
            raise OptionError(f"a {self.store_type.value} store needs its windowing: give the window size (--window)")
        if self.store_type.sessioned and not isinstance(self.windowing, SessionSpec):
            raise OptionError(f"a {self.store_type.value} store needs its session gap (--session-gap)")
        if not self.store_type.timed and self.windowing is not None:
            raise OptionError(f"a {self.store_type.value} store has no windows: use a window store type")
        if isinstance(self.partitions, bool) or not isinstance(self.partitions, int) or self.partitions < 1:
            raise ValueError(f"a store has at least 1 partition, got {self.partitions!r}")
        if isinstance(self.subpartitions, bool) or not isinstance(self.subpartitions, int) or self.subpartitions < 1:
            raise OptionError(f"a store has at least 1 sub-partition per partition, got {self.subpartitions!r}")
        if self.subpartitions > 1 and self.store_type not in (
            StoreType.PARTITIONED_KV,
            StoreType.PARTITIONED_VERSIONED,
        ):
            raise OptionError(
                f"sub-partitions are for partitioned-kv and partitioned-versioned stores; a {self.store_type.value} "
                "store has none (leave --subpartitions at 1)"
            )
        if self.retention_ms is not None and self.store_type.timed:
            raise OptionError(
                f"a {self.store_type.value} store expires by its windowing's own retention (--retention of the "
                "job): it takes no store retention"
            )
        try:
            check_retention(self.retention_ms)
        except ValueError as exc:
            raise OptionError(str(exc)) from None
        if self.table_name is None:
            object.__setattr__(self, "table_name", store_table(self.name))
        validate_table_name(self.table_name)

    @property
    def table(self) -> str:
        return self.table_name

    @property
    def layout(self) -> tuple:
        """What fixes where data lives: two specs with one layout read the same table alike."""
        windows = None if self.windowing is None else self.windowing.layout
        return (self.store_type, self.partitions, self.table_name, windows, self.subpartitions)


class Entry(NamedTuple):
    """A stored entry: raw key and value bytes, the batch that last wrote it, its event time.

    A named tuple, not a frozen dataclass: the stream's apply makes two per key it counts, and a
    tuple is the cheapest immutable record Python builds."""

    key: bytes
    value: bytes
    batch_id: int | None = None
    time_ms: int | None = None


class WindowedEntry(NamedTuple):
    """A window store's entry: a key's value in the window starting at `start_ms` (its end is
    the store's window size later), the batch that last wrote it and its latest event time.
    A named tuple, as Entry: the stream's apply makes one per window it writes."""

    key: bytes
    start_ms: int
    value: bytes
    batch_id: int | None = None
    time_ms: int | None = None


class PaneEntry(NamedTuple):
    """A paned window store's row (statestore.core.windows, WindowSpec's panes): what `key`'s
    records of the pane starting at `pane_ms` counted in its windows starting at `from_ms` or
    later, the batch that last wrote it and its latest event time."""

    key: bytes
    pane_ms: int
    from_ms: int
    value: bytes
    batch_id: int | None = None
    time_ms: int | None = None


@dataclass(frozen=True)
class SessionEntry:
    """A session store's entry: a key's value over the session [start_ms, end_ms] (both
    inclusive, as in Kafka Streams), the batch that last wrote it and its latest event time."""

    key: bytes
    start_ms: int
    end_ms: int
    value: bytes
    batch_id: int | None = None
    time_ms: int | None = None


# The valid_to of a versioned store's current version: still valid, with no end.
OPEN_END = 2**63 - 1


@dataclass(frozen=True)
class Version:
    """One stored version of a key: raw bytes, valid over [valid_from, valid_to) in epoch ms.

    `value` None is a tombstone (the key was deleted over this interval); `batch_id` is the
    batch that wrote it (None: written through the library API); `time_ms` its event time.
    """

    key: bytes
    value: bytes | None
    valid_from: int
    valid_to: int = OPEN_END
    batch_id: int | None = None
    time_ms: int | None = None

    @property
    def current(self) -> bool:
        return self.valid_to == OPEN_END

    @property
    def tombstone(self) -> bool:
        return self.value is None

    def entry(self) -> Entry:
        return Entry(self.key, self.value, self.batch_id, self.time_ms)


@dataclass(frozen=True)
class KeyRange:
    """Bounds on raw key bytes for a scan; None is unbounded. Keys order as unsigned bytes."""

    lower: bytes | None = None
    upper: bytes | None = None
    lower_inclusive: bool = True
    upper_inclusive: bool = True

    @classmethod
    def prefix(cls, prefix: bytes) -> KeyRange:
        return cls(prefix or None, prefix_end(prefix), True, False)

    def after(self, key: bytes, reverse: bool = False) -> KeyRange:
        """The rest of this range past `key` in scan order (a continuation)."""
        if reverse:
            return KeyRange(self.lower, key, self.lower_inclusive, False)
        return KeyRange(key, self.upper, False, self.upper_inclusive)

    def contains(self, key: bytes) -> bool:
        if self.lower is not None and (key < self.lower or (key == self.lower and not self.lower_inclusive)):
            return False
        if self.upper is not None and (key > self.upper or (key == self.upper and not self.upper_inclusive)):
            return False
        return True


EVERYTHING = KeyRange()


def prefix_end(prefix: bytes) -> bytes | None:
    """The smallest key above every key starting with `prefix` (None: no such key)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


def check_key(key: bytes) -> bytes:
    if not isinstance(key, bytes | bytearray):
        raise TypeError(f"keys are bytes at the table level, got {type(key).__name__}")
    if len(key) == 0:
        raise ValueTooLargeError("an empty key cannot be stored: Cassandra refuses empty key blobs")
    if len(key) > MAX_KEY_BYTES:
        raise ValueTooLargeError(
            f"key of {len(key)} bytes is over Cassandra's {MAX_KEY_BYTES}-byte key limit: shorten or hash it"
        )
    return bytes(key)


def check_value(data: bytes, store: str) -> bytes:
    """An encoded value of `store`, or ValueTooLargeError when it is over MAX_VALUE_BYTES."""
    if len(data) > MAX_VALUE_BYTES:
        raise ValueTooLargeError(
            f"value of {len(data)} bytes for store '{store}' is over the {MAX_VALUE_BYTES}-byte "
            "limit: split it or store a reference to it"
        )
    return data


_DATA_CENTER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,47}$")


@dataclass(frozen=True)
class Replication:
    """A keyspace's replication: SimpleStrategy with one factor (a single node, a test stack),
    or NetworkTopologyStrategy with a factor per data center (a real cluster)."""

    replication_factor: int = 1
    data_centers: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        if self.replication_factor < 1:
            raise OptionError(f"replication factor must be at least 1, got {self.replication_factor}")
        for dc, factor in self.data_centers:
            if not _DATA_CENTER.match(dc):
                raise OptionError(f"data center name {dc!r}: use letters, digits, '_', '.' or '-' (at most 48)")
            if factor < 1:
                raise OptionError(f"replication factor of data center {dc} must be at least 1, got {factor}")

    @classmethod
    def network(cls, specs: list[str]) -> Replication:
        """NetworkTopologyStrategy from DC:FACTOR strings, e.g. ["dc1:3"]."""
        if not specs:
            raise OptionError("NetworkTopologyStrategy needs at least one data center: --dc dc1:3")
        pairs = []
        for spec in specs:
            dc, _, factor = spec.partition(":")
            if not factor.isdigit():
                raise OptionError(f"--dc {spec!r}: write DATA_CENTER:FACTOR, e.g. dc1:3")
            pairs.append((dc, int(factor)))
        if len({dc for dc, _ in pairs}) != len(pairs):
            raise OptionError(f"a data center is named twice in {', '.join(specs)}")
        return cls(data_centers=tuple(pairs))

    def warning(self, nodes: Mapping[str, int]) -> str | None:
        """What is wrong with this replication on a cluster of `nodes` (data center -> nodes the
        driver sees), or None: fewer replicas than the nodes could give, up to 3 (a lost node then
        loses data, and a quorum needs every replica), or more than there are nodes."""
        if not self.data_centers:
            return _replication_warning(self.replication_factor, sum(nodes.values()), "", "--replication-factor ")
        found = []
        for dc, factor in self.data_centers:
            if not nodes.get(dc):
                known = ", ".join(sorted(nodes)) or "none"
                found.append(f"data center {dc} has no node the driver sees (the cluster's: {known})")
            else:
                found.append(_replication_warning(factor, nodes[dc], f" in data center {dc}", f"--dc {dc}:"))
        return "; ".join(w for w in found if w) or None

    def cql(self) -> str:
        """The CQL map of this replication (names checked above, so safe to quote here)."""
        if not self.data_centers:
            return f"{{'class': 'SimpleStrategy', 'replication_factor': {self.replication_factor}}}"
        factors = ", ".join(f"'{dc}': {factor}" for dc, factor in self.data_centers)
        return f"{{'class': 'NetworkTopologyStrategy', {factors}}}"


def _replication_warning(factor: int, nodes: int, where: str, flag: str) -> str | None:
    if nodes == 0:
        return None
    wanted = min(nodes, 3)
    said = f"replication factor {factor} with {nodes} node{'s' if nodes > 1 else ''}{where}"
    if factor < wanted:
        lost = " and a lost disk loses the only copy of its share of the counts" if factor == 1 else ""
        return (
            f"{said}: a quorum needs {'all ' + str(factor) + ' replicas' if factor > 1 else 'the one replica'}, "
            "so one node down "
            f"stops every read and write of its share of the keys{lost}; pass {flag}{wanted}"
        )
    if factor > nodes:
        quorum = factor // 2 + 1
        never = (
            f", so a quorum ({quorum} replicas) can never be reached and writes at it fail" if quorum > nodes else ""
        )
        return f"{said}: only {nodes} replica{'s' if nodes > 1 else ''} can exist{never}; pass {flag}{wanted}"
    return None
