"""One run of a store's stream, as it records itself for `statestore status` and the metrics:
its state changes and each committed batch (statestore.store.book.stream_log).

A run goes starting -> waiting_for_lease -> (recovering, when --recover-from-store finishes a
pending batch) -> running -> stopping -> stopped, or failed with the reason. Its restart time
is the time from its start to its first committed batch, recorded on a second `running` row.
A run that another writer keeps from the lease records `refused` instead of `failed`. Every row
carries the run's lease holder name (`writer`), so a reader tells the writer's run from a
refused one (statestore.store.book.status.store_state).

State rows are best effort: a Cassandra that cannot be reached after the usual retries is
logged, not raised, so recording never hides the error that stopped the stream. Batch rows are
written like the registry's progress (retried, and a failure fails the batch).
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

from statestore.conn.cassandra import session_for
from statestore.conn.retry import with_retries
from statestore.core.config import CassandraConfig
from statestore.core.errors import CassandraUnavailableError
from statestore.core.model import StoreSpec
from statestore.store.book import stream_log
from statestore.store.book.stream_log import BatchRecord

_log = logging.getLogger("statestore.stream.monitor")
_REASON_CHARS = 1000


class StreamMonitor:
    def __init__(self, config: CassandraConfig, spec: StoreSpec) -> None:
        self.config = config
        self.spec = spec
        self.run_id: str | None = None
        self.writer: str | None = None  # the name the run takes the store's lease under
        self._began = time.monotonic()
        self._committed = False

    def ensure_tables(self) -> None:
        session = session_for(self.config)
        with_retries(
            self.config, "creating the stream log", lambda: stream_log.ensure_tables(session, self.spec.keyspace)
        )

    def state(self, state: str, reason: str | None = None, restart_seconds: float | None = None) -> None:
        session = session_for(self.config)
        reason = None if reason is None else reason[:_REASON_CHARS]

        def record() -> None:
            stream_log.record_state(
                session,
                self.spec.keyspace,
                self.spec.name,
                state,
                reason=reason,
                run_id=self.run_id,
                restart_seconds=restart_seconds,
                writer=self.writer,
            )

        try:
            with_retries(self.config, f"recording the stream's state ({state})", record)
        except CassandraUnavailableError as exc:
            _log.warning("store %s: state %s not recorded: %s", self.spec.name, state, exc)

    def batch(self, record: BatchRecord) -> None:
        """Record a committed batch with the running sums carried on from the batch before it;
        the run's first batch also records its restart time."""
        session = session_for(self.config)
        keyspace, store = self.spec.keyspace, self.spec.name

        def log() -> None:
            before = stream_log.totals_before(session, keyspace, store, record.batch_id)
            totals = before.plus(record.written, record.skipped, record.words, record.dead_letter_reasons)
            stream_log.record_batch(session, keyspace, store, replace(record, totals=totals))

        with_retries(self.config, "recording the batch in the stream log", log)
        if not self._committed:
            self._committed = True
            seconds = round(time.monotonic() - self._began, 3)
            self.state(stream_log.RUNNING, f"first batch ({record.batch_id}) committed", restart_seconds=seconds)
