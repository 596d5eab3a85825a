"""The partition audit: per Cassandra partition of every store, entries and bytes against thresholds."""
