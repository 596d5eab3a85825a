"""Errors the library raises. Each message says what was wrong and how to fix it."""


class StateStoreError(Exception):
    """Base class: anything the CLI and jobs report as a clean one-line error."""


class InvalidNameError(StateStoreError, ValueError):
    """A store, keyspace or topic name that is unsafe or unusable in CQL."""


class ConfigError(StateStoreError, ValueError):
    """A configuration value that cannot be used."""


class StoreNotFoundError(StateStoreError, LookupError):
    """The named store is not registered in the keyspace."""


class StoreMismatchError(StateStoreError):
    """An existing store was opened with a different type or partition count."""


class KeyspaceMissingError(StateStoreError):
    """The keyspace does not exist; the job never creates keyspaces on its own."""


class StoreTableLostError(StateStoreError):
    """A store's table is gone while its registry still records batches: creating it again
    empty would count on from the recorded offsets and lose every earlier count."""


class CheckpointMismatchError(StateStoreError):
    """The Spark checkpoint is older than the store: it was lost, replaced or reused."""


class StoreFencedError(StateStoreError):
    """A writer that lost its store to a newer one (a higher epoch) tried to record progress."""


class CassandraUnavailableError(StateStoreError):
    """Cassandra could not be reached."""


class KafkaError(StateStoreError):
    """Kafka could not be reached, or refused a request."""


class CodecError(StateStoreError, ValueError):
    """Bytes that do not decode with the store's codec."""


class StoredDataError(StateStoreError):
    """Bytes read from a store that its codec cannot decode: the stored data is wrong, not the
    request (the HTTP API answers 500, not 400)."""


class UnsupportedOperationError(StateStoreError):
    """The operation does not fit the store type's layout; the message names what to use."""


class ValueTooLargeError(StateStoreError, ValueError):
    """A key or value over the size Cassandra (or the store) accepts."""


class OptionError(StateStoreError, ValueError):
    """A store or table option that is unknown or out of range."""


class ConfirmationRequiredError(StateStoreError):
    """A destructive action was asked for without its explicit confirmation."""


class NodetoolError(StateStoreError):
    """nodetool (Cassandra's JMX tool) is unavailable or a command of it failed."""


class MaintenanceCheckError(StateStoreError):
    """A maintenance check failed: a partition over its threshold, or a store that differs
    from its input; the message names the first offending partitions or keys."""


class StoreChangedError(StateStoreError):
    """The store was written while a maintenance job needed it to hold still."""


class FutureStreamTimeError(StateStoreError):
    """Expiry by stream time whose cutoff is later than the wall clock: the store's stream time
    is in the future (a record from a producer whose clock was ahead), so it would expire
    entries that are not old at all."""


class WriterMayBeLiveError(StateStoreError):
    """A store cannot be reset safely: a batch of it was begun and never recorded, so its
    writer may be paused mid-batch and would send the rest of that batch into the emptied
    store, where (for this layout) nothing can shadow it, and the store cannot move to a new
    table generation either (its name would be over 48 characters)."""


class StoreSchemaError(StateStoreError):
    """A store whose schema version is not this release's: an older one must be migrated
    (`statestore migrate`) before a stream writes it, a newer one needs a newer release."""
