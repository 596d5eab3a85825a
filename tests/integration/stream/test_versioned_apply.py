"""The replay-safe apply on versioned stores: a batch that dies part-way and is replayed,
speculative duplicates and a zombie of the previous batch leave exactly one version per
batch per key, with the right counts."""

from __future__ import annotations

import pytest

from statestore.core.codecs import decode_long
from statestore.core.model import OPEN_END, StoreSpec, StoreType
from statestore.store.provision import provision_store
from statestore.store.tables import table_for
from statestore.stream.apply import Delta, apply_deltas, plan_versions

KEYS = [f"w{i}".encode() for i in range(40)] + ["école".encode(), "日本語".encode()]


def _histories(session, table) -> dict[bytes, list[tuple]]:
    return {
        k: [(decode_long(v.value), v.valid_from, v.valid_to, v.batch_id) for v in table.history(session, k)]
        for k in KEYS
    }


@pytest.mark.parametrize("store_type", [StoreType.PARTITIONED_VERSIONED, StoreType.GLOBAL_VERSIONED])
def test_replays_and_zombies_leave_one_version_per_batch(session, keyspace, store_name, store_type):
    spec = provision_store(session, StoreSpec(keyspace, store_name, store_type, 4 if store_type.partitioned else 1))
    table = table_for(spec)
    batch1 = [Delta(k, 1, 100) for k in KEYS]
    batch2 = [Delta(k, 2, 150) for k in KEYS]

    # A zombie attempt of batch 1 plans before batch 1 is applied, and sends its writes only
    # after batch 2 ran.
    zombie, _ = plan_versions(table.read_latest(session, KEYS, 8), batch1, 1, 100)
    assert len(zombie) == len(KEYS)
    assert apply_deltas(session, spec, 1, batch1, 16, write_ts=1_000, version_ms=100).written == len(KEYS)

    # Batch 2 dies after a third of its keys, then runs again in full, then once more.
    partial = apply_deltas(session, spec, 2, batch2[: len(KEYS) // 3], 16, write_ts=2_000, version_ms=200)
    replay = apply_deltas(session, spec, 2, batch2, 16, write_ts=2_000, version_ms=200)
    reached = len(KEYS) // 3
    assert (partial.written, replay.written, replay.skipped) == (reached, len(KEYS) - reached, reached)
    duplicate = apply_deltas(session, spec, 2, batch2, 16, write_ts=2_000, version_ms=200)
    assert (duplicate.written, duplicate.skipped) == (0, len(KEYS))

    expected = {k: [(1, 100, 200, 1), (3, 200, OPEN_END, 2)] for k in KEYS}
    assert _histories(session, table) == expected

    # The stale batch replayed through the apply skips every key; sent blindly with its older
    # write timestamp, its rows lose to batch 2's.
    assert apply_deltas(session, spec, 1, batch1, 16, write_ts=1_000, version_ms=100).skipped == len(KEYS)
    table.write_rows(session, zombie, 16, 1_000)
    assert _histories(session, table) == expected
