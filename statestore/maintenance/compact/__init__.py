"""Compaction: prune versioned history, measure tombstones, ask Cassandra to compact."""
