"""What every aggregation defines: the five parts (identity, a batch's partial, merge, finish,
codec) and its validation, with input, accumulator and result kept apart."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from statestore.core.errors import CodecError

# The field types a kind reads from a record (the input stage checks each record's field against
# it, and a record whose field is not of it is a dead letter): any JSON number, a JSON integer
# that fits a signed 64-bit long, any JSON value, or no field at all.
NUMBER, INTEGER, ANY_VALUE, NO_FIELD = "number", "integer", "any", None


class Kind(ABC):
    """One aggregation. Its accumulator is what a store keeps; its result is what readers show.

    `partial_sql(column)` is the Spark SQL aggregate that makes a batch's partial accumulator of
    a key from the field's typed column (the input stage names the columns `time_ms`, `partition`
    and `offset` beside it); `from_partial` turns Spark's value of it into an accumulator.
    `idempotent`: merging an accumulator into itself changes nothing (max, min, latest, distinct),
    so a replay could not double it even without the batch tag; count and sum need the tag."""

    name: ClassVar[str]
    takes: ClassVar[str | None]
    idempotent: ClassVar[bool] = False
    # The first byte of every stored accumulator of this kind: a later release that changes the
    # bytes gives them another version, and reads both.
    version: ClassVar[int] = 1

    @abstractmethod
    def identity(self) -> Any:
        """The accumulator of no input: merge(identity(), a) == a."""

    @abstractmethod
    def partial_sql(self, column: str) -> str:
        """Spark SQL aggregate over `column` (the field, typed as `takes` says) for one batch."""

    @abstractmethod
    def from_partial(self, value: Any) -> Any:
        """The accumulator of Spark's partial value (None where Spark saw no value)."""

    @abstractmethod
    def merge(self, left: Any, right: Any) -> Any:
        """Associative and commutative: the accumulator of both inputs together."""

    def finish(self, accumulator: Any) -> Any:
        """The result readers show (by default the accumulator itself)."""
        return accumulator

    def problems(self, result: Any) -> list[str]:
        """What is wrong with a stored result (the maintenance job's validation); [] when none."""
        return []

    @abstractmethod
    def _encode(self, accumulator: Any) -> bytes: ...

    @abstractmethod
    def _decode(self, data: bytes) -> Any: ...

    def encode(self, accumulator: Any) -> bytes:
        """The stored bytes: the version byte, then the kind's own."""
        return bytes((self.version,)) + self._encode(accumulator)

    def decode(self, data: bytes) -> Any:
        if not data or data[0] != self.version:
            found = "nothing" if not data else f"version {data[0]}"
            raise CodecError(f"a {self.name} accumulator starts with version {self.version}, found {found}")
        try:
            return self._decode(bytes(data[1:]))
        except (ValueError, TypeError, IndexError) as exc:  # struct.error is a ValueError
            raise CodecError(f"a {self.name} accumulator cannot be read: {exc}") from None
