"""Prepared statements are held per session object: prepared once for it, never handed to another
session (even one created after it is gone), and dropped with it."""

from __future__ import annotations

import gc

from statestore.conn import cassandra


class _Session:
    """Prepares statements that, like the driver's, hold no reference back to their session."""

    def __init__(self, name):
        self.name = name
        self.prepared = 0

    def prepare(self, cql):
        self.prepared += 1
        return f"{self.name}: {cql}"


def test_a_statement_is_prepared_once_per_session():
    first, second = _Session("first"), _Session("second")
    assert cassandra.prepare(first, "SELECT 1") is cassandra.prepare(first, "SELECT 1")
    assert cassandra.prepare(second, "SELECT 1") == "second: SELECT 1"
    assert (first.prepared, second.prepared) == (1, 1)


def test_a_session_that_is_gone_takes_its_statements_with_it():
    gone = _Session("gone")
    cassandra.prepare(gone, "SELECT 2")
    held = len(cassandra._prepared)
    del gone
    gc.collect()
    assert len(cassandra._prepared) == held - 1
    fresh = _Session("fresh")  # may reuse the freed id(): it must still prepare its own statement
    assert cassandra.prepare(fresh, "SELECT 2") == "fresh: SELECT 2" and fresh.prepared == 1
