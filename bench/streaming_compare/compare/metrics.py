"""Pure arithmetic of the side-by-side benchmark (streaming_compare.py): what a run's
streaming progress events and the record index of its Kafka topic say about throughput,
batch durations, latency and restart time. No Spark, no I/O: unit-tested on its own.

A progress event is the JSON of a StreamingQueryProgress, as a dict. Times: its `timestamp`
is when the trigger began (driver clock, UTC, milliseconds) and `durationMs.triggerExecution`
covers the whole micro-batch up to and including the commit of its offsets, so a batch has
committed at timestamp + triggerExecution. The record index holds what the producer learnt
from Kafka for every message it sent: partition, offset, how many words it holds, and its
Kafka timestamp (CreateTime, set by the producer on the same machine, same clock).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0-100) with linear interpolation between the closest ranks (as
    numpy's default), or None for no values."""
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is outside 0-100")
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def ratio(value: float | None, reference: float | None) -> float | None:
    """value / reference, or None when either is missing or the reference is zero."""
    if value is None or reference is None or reference == 0:
        return None
    return value / reference


def epoch_ms(timestamp: str) -> float:
    """A progress event's timestamp ('2026-11-22T10:42:15.123Z') as milliseconds since the epoch."""
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp() * 1000


def commit_ms(progress: dict) -> float:
    """When the event's micro-batch had committed (epoch ms)."""
    return epoch_ms(progress["timestamp"]) + progress["durationMs"].get("triggerExecution", 0)


def data_batches(events: Iterable[dict]) -> list[dict]:
    """The events of batches that read something, in batch order (one per batch id: a batch
    re-reported after a restart counts once)."""
    by_id = {e["batchId"]: e for e in events if e.get("numInputRows", 0) > 0}
    return [by_id[b] for b in sorted(by_id)]


def _offsets(raw) -> dict[int, int]:
    """One source's offsets JSON ({"topic": {"0": 12, ...}}) as {partition: offset}; a
    missing start (the first batch of a new checkpoint) is the empty dict."""
    if raw is None:
        return {}
    parsed = json.loads(raw) if isinstance(raw, str) else raw
    (per_partition,) = parsed.values()  # one topic per query
    return {int(p): int(o) for p, o in per_partition.items()}


def batch_range(progress: dict) -> tuple[dict[int, int], dict[int, int]]:
    """(start, end) offsets per partition read by the event's batch (end exclusive)."""
    (source,) = progress["sources"]
    return _offsets(source.get("startOffset")), _offsets(source.get("endOffset"))


@dataclass
class RecordIndex:
    """Per partition, in offset order from the partition's first recorded offset (`base`):
    words and Kafka timestamp of each record."""

    words: dict[int, list[int]] = field(default_factory=dict)
    timestamps_ms: dict[int, list[float]] = field(default_factory=dict)
    base: dict[int, int] = field(default_factory=dict)
    _cumulative: dict[int, list[int]] = field(default_factory=dict, repr=False)

    def add(self, partition: int, offset: int, words: int, timestamp_ms: float) -> None:
        """Record one delivered message; a partition's messages must come in offset order,
        without gaps."""
        words_of = self.words.setdefault(partition, [])
        base = self.base.setdefault(partition, offset)
        if offset != base + len(words_of):
            raise ValueError(f"partition {partition}: offset {offset} recorded after offset {base + len(words_of) - 1}")
        words_of.append(words)
        self.timestamps_ms.setdefault(partition, []).append(timestamp_ms)
        self._cumulative.pop(partition, None)

    def _prefix(self, partition: int) -> list[int]:
        if partition not in self._cumulative:
            sums = [0]
            for n in self.words.get(partition, []):
                sums.append(sums[-1] + n)
            self._cumulative[partition] = sums
        return self._cumulative[partition]

    def _slice(self, partition: int, start: dict[int, int], stop: int) -> tuple[int, int]:
        """Positions in the partition's lists of offsets [start, stop), clipped to what is recorded."""
        base, size = self.base.get(partition, 0), len(self.words.get(partition, []))
        first = min(max(start.get(partition, base) - base, 0), size)
        return first, min(max(stop - base, first), size)

    def words_between(self, start: dict[int, int], end: dict[int, int]) -> int:
        """Words in the records of offsets [start, end) per partition (a partition missing
        from `start` is read from its first recorded offset)."""
        total = 0
        for partition, stop in end.items():
            first, last = self._slice(partition, start, stop)
            prefix = self._prefix(partition)
            total += prefix[last] - prefix[first]
        return total

    def timestamps_between(self, start: dict[int, int], end: dict[int, int]) -> list[float]:
        out: list[float] = []
        for partition, stop in end.items():
            first, last = self._slice(partition, start, stop)
            out.extend(self.timestamps_ms.get(partition, [])[first:last])
        return out

    @property
    def records(self) -> int:
        return sum(len(w) for w in self.words.values())

    def to_json(self) -> dict:
        return {
            "words": {str(p): w for p, w in self.words.items()},
            "ts": {str(p): t for p, t in self.timestamps_ms.items()},
        }

    @classmethod
    def from_json(cls, data: dict) -> RecordIndex:
        return cls({int(p): w for p, w in data["words"].items()}, {int(p): t for p, t in data["ts"].items()})


def throughput(events: Iterable[dict], index: RecordIndex) -> dict:
    """Words per second of a run that read a backlog, and its batch durations.

    `sustained_words_per_s` leaves out the first batch (query start-up, cold JIT and
    connections): words of batches 2..n over the time from the start of batch 2 to the
    commit of batch n, gaps between batches included. `overall_words_per_s` is every word
    over the first batch's start to the last commit. The batch duration percentiles leave
    out the first batch too (`first_batch_s`)."""
    batches = data_batches(events)
    if not batches:
        return {"batches": 0, "words": 0}
    words = [index.words_between(*batch_range(b)) for b in batches]
    durations = [b["durationMs"].get("triggerExecution", 0) / 1000 for b in batches]
    steady = durations[1:] or durations
    first_start, last_commit = epoch_ms(batches[0]["timestamp"]), commit_ms(batches[-1])
    out = {
        "batches": len(batches),
        "words": sum(words),
        "records": sum(b["numInputRows"] for b in batches),
        "words_per_batch": words,
        "batch_s": durations,
        "first_batch_s": durations[0],
        "batch_p50_s": percentile(steady, 50),
        "batch_p99_s": percentile(steady, 99),
        "overall_words_per_s": sum(words) / max((last_commit - first_start) / 1000, 1e-9),
    }
    if len(batches) > 1:
        span = (last_commit - epoch_ms(batches[1]["timestamp"])) / 1000
        out["sustained_words_per_s"] = sum(words[1:]) / max(span, 1e-9)
    else:
        out["sustained_words_per_s"] = out["overall_words_per_s"]
    return out


def record_latencies(events: Iterable[dict], index: RecordIndex, produced_from_ms: float) -> list[float]:
    """End-to-end latency (seconds) of every record produced at or after `produced_from_ms`:
    the commit of the batch that read it minus the record's Kafka timestamp."""
    out: list[float] = []
    for batch in data_batches(events):
        committed = commit_ms(batch)
        for ts in index.timestamps_between(*batch_range(batch)):
            if ts >= produced_from_ms:
                out.append((committed - ts) / 1000)
    return out


def latency_summary(latencies: Sequence[float], produced: int, seen: int) -> dict:
    """p50/p99/max of the latencies; `complete` says whether every measured record was read."""
    return {
        "records": len(latencies),
        "p50_s": percentile(latencies, 50),
        "p99_s": percentile(latencies, 99),
        "max_s": max(latencies) if latencies else None,
        "complete": seen >= produced,
    }


def restart_seconds(started_ms: float, events: Iterable[dict]) -> dict | None:
    """Time from the restart call (`started_ms`, epoch) until the first batch that read
    something had committed, with where it went: until that batch's trigger began (query
    start, checkpoint and state set-up before the trigger) and the batch itself."""
    batches = data_batches(events)
    if not batches:
        return None
    first = batches[0]
    began = epoch_ms(first["timestamp"])
    return {
        "restart_s": (commit_ms(first) - started_ms) / 1000,
        "until_trigger_s": (began - started_ms) / 1000,
        "first_batch_s": first["durationMs"].get("triggerExecution", 0) / 1000,
        "durations_ms": dict(first["durationMs"]),
    }
