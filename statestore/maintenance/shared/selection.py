"""Pure selectors of the maintenance jobs: which partitions breach, what to expire, what the
report recommends. No I/O here: the jobs feed these functions what they read."""

from __future__ import annotations

import enum
import heapq
import math
from collections.abc import Iterable
from dataclasses import dataclass

from statestore.core.errors import ConfigError
from statestore.core.retention import cutoff_ms, expired
from statestore.maintenance.shared.units import MIB, human_bytes


class Level(enum.IntEnum):
    OK = 0
    WARN = 1
    FAIL = 2


class Policy(enum.StrEnum):
    """What a breach of the fail threshold does to the job: fail it, or only warn."""

    FAIL = "fail"
    WARN = "warn"


@dataclass(frozen=True)
class Thresholds:
    """Partition limits: Cassandra's guidance warns past 100 MiB and never goes over 400 MiB.
    Entry counts are off unless given."""

    warn_bytes: int = 100 * MIB
    fail_bytes: int = 400 * MIB
    warn_entries: int | None = None
    fail_entries: int | None = None

    def __post_init__(self) -> None:
        if not 0 < self.warn_bytes <= self.fail_bytes:
            raise ConfigError(
                f"partition size thresholds must satisfy 0 < warn ({self.warn_bytes}) <= fail ({self.fail_bytes})"
            )
        if self.warn_entries is not None and self.fail_entries is not None and self.warn_entries > self.fail_entries:
            raise ConfigError(f"entry thresholds must satisfy warn ({self.warn_entries}) <= fail ({self.fail_entries})")

    def level(self, size_bytes: int, entries: int) -> Level:
        """How a partition of `size_bytes` and `entries` stands against these limits."""
        if size_bytes > self.fail_bytes or (self.fail_entries is not None and entries > self.fail_entries):
            return Level.FAIL
        if size_bytes > self.warn_bytes or (self.warn_entries is not None and entries > self.warn_entries):
            return Level.WARN
        return Level.OK

    def reason(self, size_bytes: int, entries: int) -> str:
        """Which limits a partition passes, in words."""
        reasons = []
        for label, limit in (("fail", self.fail_bytes), ("warn", self.warn_bytes)):
            if size_bytes > limit:
                reasons.append(f"{human_bytes(size_bytes)} over the {label} threshold of {human_bytes(limit)}")
                break
        for label, limit in (("fail", self.fail_entries), ("warn", self.warn_entries)):
            if limit is not None and entries > limit:
                reasons.append(f"{entries} entries over the {label} threshold of {limit}")
                break
        return "; ".join(reasons)


@dataclass(frozen=True)
class PartitionStat:
    """One Cassandra partition of a store: how to name it, its token, entries and bytes."""

    partition: str
    token: int
    entries: int
    bytes: int


def top_partitions(stats: Iterable[PartitionStat], n: int) -> list[PartitionStat]:
    """The `n` largest partitions by bytes, then entries (ties broken by name, so stable)."""
    return heapq.nlargest(n, stats, key=lambda s: (s.bytes, s.entries, s.partition))


# Histogram buckets of partition sizes: powers of two, bucket i holds sizes in [2^i, 2^(i+1)).
HISTOGRAM_BUCKETS = 48


def size_bucket(size_bytes: int) -> int:
    return min(max(int(size_bytes), 1).bit_length() - 1, HISTOGRAM_BUCKETS - 1)


def bucket_label(bucket: int) -> str:
    """The bucket's lower bound, e.g. '1.0 MiB' for [1 MiB, 2 MiB)."""
    return human_bytes(2**bucket)


def verdict(worst: Level, policy: Policy) -> str:
    """A job's status from the worst breach: 'ok', 'warn' or 'fail' (fail only under the fail policy)."""
    if worst == Level.FAIL and policy == Policy.FAIL:
        return "fail"
    return "ok" if worst == Level.OK else "warn"


def recommend(
    store_type: str,
    store_partitions: int,
    partitions_seen: int,
    total_bytes: int,
    max_partition_bytes: int,
    thresholds: Thresholds,
    subpartitions: int = 1,
) -> list[str]:
    """What to do when a store outgrows its layout (an empty list: nothing to do): from half
    the warn threshold on, so there is time to act before it is passed."""
    advice: list[str] = []
    comfortable = thresholds.warn_bytes // 2
    if max_partition_bytes <= comfortable:
        return advice
    partitioned = store_type.startswith("partitioned")
    versioned = store_type.endswith("versioned")
    if partitioned:
        needed = max(store_partitions + 1, math.ceil(total_bytes / comfortable))
        severity = "is over" if max_partition_bytes > thresholds.warn_bytes else "is approaching"
        advice.append(
            f"the largest partition ({human_bytes(max_partition_bytes)}) {severity} the warn threshold "
            f"({human_bytes(thresholds.warn_bytes)}): this {store_type} store spreads "
            f"{human_bytes(total_bytes)} over {store_partitions} partition(s)"
            + (f" x {subpartitions} sub-partitions." if subpartitions > 1 else ".")
        )
        if store_type in ("partitioned-kv", "partitioned-versioned"):
            wanted = recommended_subpartitions(max_partition_bytes, subpartitions, comfortable)
            kept = "keys, ranges and order" + (" and every key's history" if versioned else "")
            advice.append(
                f"re-lay it out with {wanted} sub-partitions per partition: `statestore relayout STORE "
                f"--subpartitions {wanted}` (admin DAG action relayout, with the stream stopped) keeps each "
                f"Cassandra partition near {human_bytes(max_partition_bytes * subpartitions // wanted)} "
                f"(at most {human_bytes(comfortable)}), with the same {kept}."
            )
        global_type = "global-versioned" if versioned else "global-kv"
        advice.append(
            f"switch to the {global_type} store type (every key its own partition: no partition grows with "
            f"the store), or re-create the store with at least {needed} partitions (keeps each near "
            f"{human_bytes(comfortable)}; allow for growth) and re-run the stream into it."
        )
        if partitions_seen > 1 and max_partition_bytes > 2 * total_bytes / partitions_seen:
            advice.append(
                "partition sizes are skewed: a few hot keys dominate; more partitions help less than the global type."
            )
    elif versioned:
        advice.append(
            f"a single key's history reaches {human_bytes(max_partition_bytes)}: compact it "
            "(jobs/compact_state.py --history-retention) to drop old versions."
        )
    else:
        advice.append(
            f"a single key's value reaches {human_bytes(max_partition_bytes)}: split large values over "
            "several keys; a partition per key cannot be split further."
        )
    return advice


def recommended_subpartitions(max_partition_bytes: int, subpartitions: int, target_bytes: int) -> int:
    """Sub-partitions per store partition that bring the largest Cassandra partition to at
    most `target_bytes`: the largest store partition (the largest Cassandra partition times the
    sub-partitions it is one of now; sub-partitions are even, keys are hashed) divided by the
    target, rounded up to a power of two (room to grow), and more than now."""
    needed = math.ceil(max_partition_bytes * subpartitions / max(target_bytes, 1))
    power = 1 << max(needed - 1, 0).bit_length()
    return max(power, 2 * subpartitions)


class TimeBasis(enum.StrEnum):
    """What an entry's age is measured in: stream time (its event time against the largest
    event time the stream has applied) or processing time (its write time against the clock)."""

    STREAM = "stream"
    PROCESSING = "processing"


@dataclass(frozen=True)
class Cutoff:
    """Entries dated before `at_ms` (on `basis`) expire."""

    basis: TimeBasis
    at_ms: int


def expiry_cutoff(basis: TimeBasis, retention_ms: int, stream_time_ms: int | None, now_ms: int) -> Cutoff:
    """Where retention ends: `retention_ms` before the stream's time, or before now."""
    if retention_ms <= 0:
        raise ConfigError(f"a retention must be positive, got {retention_ms} ms")
    if basis == TimeBasis.STREAM:
        if stream_time_ms is None:
            raise ConfigError(
                "the store has no stream time yet (no batch with event times was applied): expire by "
                "processing time (--basis processing) or wait for the stream"
            )
        return Cutoff(basis, cutoff_ms(retention_ms, stream_time_ms))
    return Cutoff(basis, now_ms - retention_ms)


def is_expired(cutoff: Cutoff, time_ms: int | None, writetime_us: int | None) -> bool | None:
    """Whether an entry of event time `time_ms`, written at `writetime_us`, is past `cutoff`;
    None when it carries no time on that basis (such entries are kept and counted)."""
    if cutoff.basis == TimeBasis.STREAM:  # the readers' rule (statestore.core.retention)
        return None if time_ms is None else expired(time_ms, cutoff.at_ms)
    return None if writetime_us is None else writetime_us // 1000 < cutoff.at_ms


def judge_count(
    stored: int | None,
    stored_time_ms: int | None,
    total: int | None,
    last_ms: int | None,
    recent: int | None,
    expiry_applies: bool,
) -> str | None:
    """How a store entry differs from the recount of its input, or None if it does not.

    `total` counts every occurrence of the key in the input (None: none), `last_ms` is the
    latest one's time, and `recent` counts those at or after the latest expiry cutoff. Expiry
    may have removed an entry whose occurrences were all older than the cutoff, after which
    its count starts again from zero, so once expiry applies a count may be anywhere between
    `recent` and `total`; otherwise it must be `total` exactly, with `last_ms` as its time.
    """
    recent = total if not expiry_applies else (recent or 0)
    if stored is None:
        return None if total is None or recent == 0 else "missing"
    if total is None:
        return "unexpected"
    if recent == total:
        if stored != total:
            return "count"
        return "time" if last_ms is not None and stored_time_ms != last_ms else None
    return None if recent <= stored <= total else "count"


@dataclass(frozen=True)
class VersionRow:
    """One stored version of a key, as compaction sees it."""

    valid_from: int
    valid_to: int
    tombstone: bool


def versions_to_drop(versions: list[VersionRow], cutoff_ms: int) -> tuple[list[int], bool]:
    """(valid_to of each version to drop, whether that is every version of the key).

    History before `cutoff_ms` is no longer needed: a version that ended at or before it
    serves no read as of the cutoff or later, so it goes, but the latest version always stays.
    A key whose latest version is a deletion (a tombstone version) that began at or before the
    cutoff is gone for every such read, so all its versions go (the key is logically deleted).
    """
    if not versions:
        return [], False
    latest = max(versions, key=lambda v: v.valid_to)
    if latest.tombstone and latest.valid_from <= cutoff_ms:
        return sorted(v.valid_to for v in versions), True
    return sorted(v.valid_to for v in versions if v is not latest and v.valid_to <= cutoff_ms), False


def tombstone_action(droppable_ratio: float | None, threshold: float) -> bool:
    """Whether Cassandra should be asked to compact: its estimated droppable tombstone ratio
    (tombstones past gc_grace_seconds that a compaction would purge) is over `threshold`."""
    return droppable_ratio is not None and droppable_ratio > threshold
