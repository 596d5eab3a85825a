"""The writer's lease on the real Cassandra, beyond what the stream tests cover: a lease kept
alive by renewals for longer than its TTL still names its holder and when it was taken."""

from __future__ import annotations

import time

import pytest

from statestore.store.book.lease import LeaseHeldError, StoreLease, current_holder


def test_a_lease_renewed_past_its_ttl_still_names_its_holder_and_start(session, keyspace, store_name):
    first = StoreLease(session, keyspace, store_name, "/checkpoints/a", ttl_s=2)
    first.acquire()
    try:
        taken = current_holder(session, keyspace, store_name).acquired_at
        assert taken is not None
        # Renewals keep the row alive well past the TTL of its first write (2 s).
        until = time.monotonic() + 5
        while time.monotonic() < until:
            first.renew()
            time.sleep(0.5)
        assert current_holder(session, keyspace, store_name).acquired_at == taken
        second = StoreLease(session, keyspace, store_name, "/checkpoints/b", ttl_s=2)
        with pytest.raises(LeaseHeldError, match=f"being written by {first.holder} .*since 20") as held:
            second.acquire()
        assert "/checkpoints/a" in str(held.value)
    finally:
        first.release()
    assert current_holder(session, keyspace, store_name) is None
