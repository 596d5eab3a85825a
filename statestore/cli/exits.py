"""The CLI's exit codes and the one place that maps the library's errors to them."""

from __future__ import annotations

import textwrap

from cassandra import DriverException, OperationTimedOut, ReadTimeout, Unavailable, WriteTimeout
from cassandra.cluster import NoHostAvailable

from statestore.core.errors import (
    CassandraUnavailableError,
    CheckpointMismatchError,
    CodecError,
    ConfigError,
    ConfirmationRequiredError,
    FutureStreamTimeError,
    InvalidNameError,
    KafkaError,
    KeyspaceMissingError,
    NodetoolError,
    OptionError,
    StateStoreError,
    StoreChangedError,
    StoreFencedError,
    StoreMismatchError,
    StoreNotFoundError,
    StoreSchemaError,
    UnsupportedOperationError,
    ValueTooLargeError,
    WriterMayBeLiveError,
)
from statestore.core.event_time import TimestampedLineError
from statestore.store.book.lease import LeaseHeldError, LeaseLostError

OK = 0
UNEXPECTED = 1
USAGE = 2
NOT_FOUND = 3
REFUSED = 4
UNAVAILABLE = 5

MEANINGS = {
    OK: "ok",
    UNEXPECTED: "unexpected error (a bug, or a failure with no code of its own; the message says which)",
    USAGE: "usage error: a bad option, name, key, time or input line, or a command that does not fit the store's type",
    NOT_FOUND: "not found: no such store or keyspace, or `get`'s key is not in the store",
    REFUSED: "refused: a confirmation is missing (--yes), the store's lease is held, the writer was fenced, "
    "a writer may be live, or the store's schema version is not this release's (`statestore migrate`)",
    UNAVAILABLE: "unavailable: Cassandra or Kafka could not be reached or refused the connection (login, TLS)",
}


class KeyNotFoundError(StateStoreError, LookupError):
    """A key asked for by name is not in the store (exit 3)."""


# First match wins: more specific classes first.
_CODES: tuple[tuple[type[BaseException] | tuple[type[BaseException], ...], int], ...] = (
    ((StoreNotFoundError, KeyspaceMissingError, KeyNotFoundError), NOT_FOUND),
    (
        (
            ConfirmationRequiredError,
            LeaseHeldError,
            LeaseLostError,
            StoreFencedError,
            WriterMayBeLiveError,
            CheckpointMismatchError,
            FutureStreamTimeError,
            StoreChangedError,
            StoreSchemaError,
        ),
        REFUSED,
    ),
    ((CassandraUnavailableError, KafkaError, NodetoolError), UNAVAILABLE),
    ((NoHostAvailable, OperationTimedOut, Unavailable, ReadTimeout, WriteTimeout), UNAVAILABLE),
    (
        (
            InvalidNameError,
            ConfigError,
            CodecError,
            OptionError,
            ValueTooLargeError,
            UnsupportedOperationError,
            StoreMismatchError,
            TimestampedLineError,
        ),
        USAGE,
    ),
    ((DriverException,), UNEXPECTED),
    ((StateStoreError,), UNEXPECTED),
)


def exit_code(exc: BaseException) -> int:
    """The exit code of a command that raised `exc`."""
    for kinds, code in _CODES:
        if isinstance(exc, kinds):
            return code
    return UNEXPECTED


def epilog() -> str:
    """The exit codes, for the top-level --help (argparse's RawDescriptionHelpFormatter keeps lines)."""
    lines = (
        textwrap.fill(meaning, 96, initial_indent=f"  {code}  ", subsequent_indent="     ")
        for code, meaning in MEANINGS.items()
    )
    return "exit codes:\n" + "\n".join(lines) + "\n"
