"""A partitioned store's count when one partition's COUNT(*) outlasts its request (a partition
of millions of rows on a small node): that partition is counted page by page instead."""

from __future__ import annotations

import uuid

import pytest
from cassandra import ReadFailure, ReadTimeout
from cassandra.concurrent import ExecutionResult

from statestore.core.model import Entry, StoreSpec, StoreType
from statestore.store.provision import provision_store
from statestore.store.tables import paging, table_for


# Cassandra 5 answers a replica that aborted the read at its timeout with a ReadFailure (seen
# at 10 million keys, 2.5 million per partition), older servers and the driver with timeouts.
@pytest.mark.parametrize(
    "failure",
    [
        ReadTimeout("Operation timed out - received only 0 responses."),
        ReadFailure("Operation failed - received 0 responses and 1 failures: UNKNOWN from /127.0.0.1:7000"),
    ],
    ids=["read-timeout", "read-failure"],
)
def test_a_partition_whose_count_times_out_is_counted_by_pages(session, keyspace, monkeypatch, failure):
    spec = provision_store(session, StoreSpec(keyspace, f"n{uuid.uuid4().hex[:12]}", StoreType.PARTITIONED_KV, 4))
    table = table_for(spec)
    entries = [Entry(f"key-{i}".encode(), b"\x01", 1, None) for i in range(12_345)]
    table.write_entries(session, entries, 32, None)
    try:
        assert table.count(session) == 12_345
        real = paging.execute_concurrent
        timed_out = table.partition_of(entries[0].key)

        def one_partition_times_out(session_, statements_and_parameters, **kwargs):
            results = real(session_, statements_and_parameters, **kwargs)
            return [ExecutionResult(False, failure) if i == timed_out else r for i, r in enumerate(results)]

        monkeypatch.setattr(paging, "execute_concurrent", one_partition_times_out)
        assert table.count(session) == 12_345
    finally:
        session.execute(f"DROP TABLE {keyspace}.{spec.table}")
