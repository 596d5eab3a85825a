"""Producing the benchmark's input to Kafka while recording where every message landed.

Each delivery report tells partition, offset and Kafka timestamp of one message; with the
number of words the message holds, that is the RecordIndex from which the words of any
micro-batch (by its offsets) and the latency of any record follow exactly.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator

from compare.metrics import RecordIndex
from statestore.core.errors import KafkaError


def _producer(bootstrap: str, linger_ms: int):
    import logging

    from confluent_kafka import Producer

    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": linger_ms,
            "compression.type": "lz4",
            "enable.idempotence": True,
            "logger": logging.getLogger("bench.kafka"),
        }
    )


class RecordingProducer:
    """A Kafka producer that fills a RecordIndex from its delivery reports."""

    def __init__(self, bootstrap: str, topic: str, linger_ms: int = 20) -> None:
        self.topic = topic
        self.index = RecordIndex()
        self.sent = 0
        self.failures: list[str] = []
        self._producer = _producer(bootstrap, linger_ms)
        self._pending: list[tuple[int, int, int, float]] = []

    def _delivered(self, words: int):
        def on_delivery(err, msg) -> None:
            if err is not None:
                self.failures.append(str(err))
                return
            # Deliveries can arrive out of offset order across the partitions' batches;
            # they are sorted into the index at flush().
            self._pending.append((msg.partition(), msg.offset(), words, float(msg.timestamp()[1])))

        return on_delivery

    def send(self, value: bytes, words: int, timestamp_ms: int | None = None, partition: int | None = None) -> None:
        """Send one message (`timestamp_ms`: its Kafka timestamp, None: the producer's clock;
        `partition`: None, the producer's choice)."""
        stamp = {} if timestamp_ms is None else {"timestamp": timestamp_ms}
        if partition is not None:
            stamp["partition"] = partition
        while True:
            try:
                self._producer.produce(self.topic, value=value, on_delivery=self._delivered(words), **stamp)
                break
            except BufferError:
                self._producer.poll(0.2)  # local queue full: let deliveries drain
        self.sent += 1
        self._producer.poll(0)

    def flush(self, timeout_s: float = 120) -> RecordIndex:
        remaining = self._producer.flush(timeout_s)
        if remaining or self.failures:
            raise KafkaError(
                f"{len(self.failures) + remaining} of {self.sent} messages to {self.topic!r} were not delivered"
                + (f": {self.failures[0]}" if self.failures else " (timed out)")
            )
        for partition, offset, words, ts in sorted(self._pending):
            self.index.add(partition, offset, words, ts)
        self._pending.clear()
        return self.index


def produce_all(
    bootstrap: str,
    topic: str,
    lines: Iterable[bytes],
    words: Iterable[int],
    timestamps: Iterable[int] | None = None,
    partitions: int | None = None,
) -> RecordIndex:
    """Send every line as one message as fast as Kafka takes them; the index of all of them.
    `timestamps`: each line's Kafka timestamp (None: the producer's clock). `partitions`: send
    them round-robin over that many partitions, so every partition holds the same event times
    in the same order and batches cut in proportion read them in step (None: the producer's
    sticky choice, whose runs on one partition skew event time between partitions)."""
    producer = RecordingProducer(bootstrap, topic)
    stamps = iter(timestamps) if timestamps is not None else None
    for i, (line, n) in enumerate(zip(lines, words, strict=True)):
        producer.send(line, n, None if stamps is None else next(stamps), None if partitions is None else i % partitions)
    return producer.flush()


def spread_timestamps(count: int, span_ms: int, end_ms: int) -> list[int]:
    """Event times of `count` messages in produce order, evenly over the `span_ms` before
    `end_ms`: a corpus whose words fall in many windows and sessions, in time order."""
    if count <= 0:
        return []
    start = end_ms - span_ms
    return [start + i * span_ms // count for i in range(count)]


def paced(rate_words_per_s: float, duration_s: float, lines: list[bytes], words: list[int]) -> Iterator:
    """(line, words, due time offset) at a fixed word rate for `duration_s`, cycling `lines`."""
    if rate_words_per_s <= 0:
        raise ValueError("the input rate must be positive")
    sent_words = 0
    i = 0
    while True:
        due = sent_words / rate_words_per_s
        if due >= duration_s:
            return
        line, n = lines[i % len(lines)], words[i % len(words)]
        yield line, n, due
        sent_words += n
        i += 1


class FixedRateFeed(threading.Thread):
    """Produces `lines` at a fixed word rate for `duration_s` in the background."""

    def __init__(self, bootstrap: str, topic: str, rate: float, duration_s: float, lines, words) -> None:
        super().__init__(name="fixed-rate-feed", daemon=True)
        self.producer = RecordingProducer(bootstrap, topic, linger_ms=5)
        self.schedule = paced(rate, duration_s, lines, words)
        self.started_ms: float | None = None
        self.error: BaseException | None = None
        self.behind_s = 0.0  # how far the feed itself fell behind its schedule, at worst

    def run(self) -> None:
        try:
            began = time.monotonic()
            self.started_ms = time.time() * 1000
            for line, n, due in self.schedule:
                wait = began + due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                else:
                    self.behind_s = max(self.behind_s, -wait)
                self.producer.send(line, n)
            self.producer.flush()
        except BaseException as exc:  # noqa: BLE001 - reported by the caller through .error
            self.error = exc

    @property
    def index(self) -> RecordIndex:
        return self.producer.index
