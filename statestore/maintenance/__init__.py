"""Maintenance of Cassandra-backed stores: audit large partitions, expire, validate, compact.

Each job is a library function returning a report dataclass (statestore.maintenance.audit,
.expire, .validate, .compact); `jobs/<name>.py` are thin spark-submit entry points over
statestore.maintenance.cli. What to delete or flag is decided by pure functions in
statestore.maintenance.selection, so it is unit-tested apart from the I/O that acts on it.
"""
