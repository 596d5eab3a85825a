"""`statestore reset` against a paused writer: the job frozen (SIGSTOP) in the middle of a batch's
writes for longer than its lease, the store reset meanwhile, then the job woken (SIGCONT). The
reset took the lease and a newer epoch, so the zombie records nothing. The entries it writes
after the reset leave nothing: a partitioned key-value store shadows them (partition deletes at
the reset's timestamp floor); a global, window or session store moved to a new table generation,
so they fail on the dropped old table. The store stays empty and a new stream counts exactly."""

from __future__ import annotations

import os
import signal
import subprocess
from collections import Counter

import pytest

from statestore.core.codecs import decode_long, decode_text
from statestore.store import admin
from statestore.store.book import registry
from statestore.store.builder import open_session_store, open_window_store
from statestore.stream.faults import ENV as FAULT_ENV
from tests.corpus import generate
from tests.integration.conftest import (
    dump,
    produce_lines,
    run_stream,
    spark_submit_job,
    wait_for,
    wait_for_lease_to_lapse,
)
from tests.integration.stream.test_zombie_driver import LEASE_TTL_S, _end_session, _session_members, _stopped

PAUSED_BATCH = 1
BATCH_LINES = 500  # under --driver-apply-records: the driver applies the batch and freezes itself


# The store's type and the job flags that make it (a new store takes its type from them): the
# shadowed layout and a moved one (every type's move, window and session included, is checked in
# tests/integration/store/test_reset_table_generation.py, in seconds; a frozen job costs ~90 s).
_TYPES = {
    "partitioned-kv": (),
    "global-kv": ("--store-type", "global-kv"),
}


def _counts(session, keyspace: str, store: str, store_type: str) -> dict[str, int]:
    """Each word's count: a key-value store's values, a window or session store's summed over
    its windows or sessions (the records of a run all fall in one or two)."""
    if store_type.endswith("kv"):
        return dump(session, keyspace, store)
    opened = (open_window_store if store_type.endswith("window") else open_session_store)(session, keyspace, store)
    counts: Counter[str] = Counter()
    for item in opened.all():
        counts[item.key if isinstance(item.key, str) else decode_text(item.key)] += (
            item.value if isinstance(item.value, int) else decode_long(item.value)
        )
    return dict(counts)


@pytest.mark.parametrize("store_type", list(_TYPES))
def test_a_reset_fences_a_paused_writer_and_its_late_writes_leave_no_count(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path, store_type
):
    lines, truth = generate(4 * BATCH_LINES, seed=2828)
    produce_lines(kafka_config, topic, lines)
    checkpoint = tmp_path / "cp"
    zombie = spark_submit_job(
        *("--topic", topic, "--store", store_name, "--checkpoint", str(checkpoint), "--keyspace", keyspace),
        *("--max-offsets-per-trigger", str(BATCH_LINES), "--lease-ttl", LEASE_TTL_S, *_TYPES[store_type]),
        env={FAULT_ENV: f"pause-mid-write:{PAUSED_BATCH}"},
        start_new_session=True,  # its own session: every process of the job can be found and resumed
        stdout=open(tmp_path / "zombie.log", "w"),
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(lambda: _stopped(zombie.pid), 300, "the driver to freeze mid-write")
        frozen = registry.progress(session, keyspace, store_name)
        assert frozen.pending_batch_id == PAUSED_BATCH and frozen.last_batch_id == PAUSED_BATCH - 1
        assert _counts(session, keyspace, store_name, store_type)  # batch 0 and half of batch 1 are in
        # Its lease lapses (a paused driver renews nothing); the operator resets the store.
        wait_for_lease_to_lapse(session, keyspace, store_name, LEASE_TTL_S, whose="the zombie's")
        admin.truncate_store(session, keyspace, store_name, verb="resetting")
        reset = registry.progress(session, keyspace, store_name)
        assert not reset.has_batches
        assert _counts(session, keyspace, store_name, store_type) == {}

        # The zombie wakes up: it writes the rest of its batch, then its record is refused.
        for pid in _session_members(zombie.pid):
            os.kill(pid, signal.SIGCONT)
        zombie.wait(timeout=300)
        log = (tmp_path / "zombie.log").read_text(errors="replace")
        if store_type == "partitioned-kv":  # shadowed: its writes land, then its record is refused
            assert f"fenced off while recording batch {PAUSED_BATCH}" in log, log[-3000:]
        else:  # moved: its writes fail on the dropped table
            assert f"table {store_name}_store does not exist" in log, log[-3000:]
            assert "this writer is fenced and wrote nothing there" in log, log[-3000:]
        assert zombie.returncode == 2, log[-3000:]  # a store error stopped it (docs/streaming-job.md)
        after = registry.progress(session, keyspace, store_name)
        assert not after.has_batches and after.epoch == reset.epoch > frozen.epoch
        assert _counts(session, keyspace, store_name, store_type) == {}  # its late writes left nothing behind

        # A new stream from a new checkpoint counts the topic exactly.
        overrides = {"window": 3_600_000} if store_type.endswith("window") else {}
        overrides |= {"session_gap": 3_600_000} if store_type.endswith("session") else {}
        run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp2", **overrides)
        assert _counts(session, keyspace, store_name, store_type) == dict(truth)
    finally:
        _end_session(zombie.pid)
