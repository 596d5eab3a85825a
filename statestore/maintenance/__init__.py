"""Maintenance of Cassandra-backed stores, one sub-package per job family: audit, expire, compact,
validate, and what they share (shared). Each job is a library function returning a report dataclass;
`jobs/<name>.py` are thin spark-submit entry points over statestore.maintenance.main. What to delete
or flag is decided by pure functions in statestore.maintenance.shared.selection, unit-tested apart
from the I/O that acts on it.
"""
