"""A store's measures (which aggregation of which field, under which name) and the codec of the
value that keeps their accumulators side by side.

The text form is what users write and what the registry records as the store's value format:
`n=count(), total=sum(amount), top=max(amount)`. A measure's name is a column name (readers
show each measure under it); its field is a JSON field of the record, nested fields joined by
dots (`device.id`).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from statestore.core.aggregation.kinds import KINDS, NO_FIELD, Kind
from statestore.core.errors import CodecError

# The registry's value format of an aggregate store starts with it, the spec's text follows.
AGGREGATE_FORMAT_PREFIX = "aggregate:"

_NAME = re.compile(r"[a-z_][a-z0-9_]{0,47}")
_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_MEASURE = re.compile(r"\s*([^=\s]+)\s*=\s*([a-z_]+)\s*\(\s*([^)\s]*)\s*\)\s*")
_LENGTH = struct.Struct(">I")
# Columns readers show beside the measures (the CLI, the HTTP API, the livestate DataFrame, the
# store page): a measure may not be named like one, so every reader shows each measure by its name.
RESERVED_NAMES = frozenset(
    {"key", "value", "batch_id", "time", "time_ms", "topic", "partition", "offset", "bucket", "reason"}
    | {"window_start", "window_end", "session_start", "session_end", "valid_from", "valid_to"}
)


@dataclass(frozen=True)
class Measure:
    """One aggregation of one field, shown under `name`."""

    name: str
    kind: str
    field: str | None = None

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise ValueError(
                f"measure name {self.name!r}: use lower-case letters, digits and _ (a letter or _ first, at most 48)"
            )
        if self.name in RESERVED_NAMES:
            raise ValueError(
                f"measure name {self.name!r} is a column readers show beside the measures; choose another "
                f"(taken: {', '.join(sorted(RESERVED_NAMES))})"
            )
        kind = KINDS.get(self.kind)
        if kind is None:
            raise ValueError(f"measure {self.name}: unknown aggregation {self.kind!r}; use one of {', '.join(KINDS)}")
        if kind.takes is NO_FIELD and self.field:
            raise ValueError(f"measure {self.name}: {self.kind}() takes no field, got {self.field!r}")
        if kind.takes is not NO_FIELD and not self.field:
            raise ValueError(f"measure {self.name}: {self.kind}(FIELD) needs the field it aggregates")
        if self.field and not _FIELD.fullmatch(self.field):
            raise ValueError(f"measure {self.name}: field {self.field!r} is not a JSON field name (nested: a.b)")

    @property
    def aggregation(self) -> Kind:
        return KINDS[self.kind]

    @property
    def text(self) -> str:
        return f"{self.name}={self.kind}({self.field or ''})"


@dataclass(frozen=True)
class AggregateSpec:
    """The measures of an aggregate store, in their stored order."""

    measures: tuple[Measure, ...]

    def __post_init__(self) -> None:
        if not self.measures:
            raise ValueError("an aggregate store needs at least one measure, e.g. n=count()")
        names = [m.name for m in self.measures]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"measure names must differ: {', '.join(repeated)} repeated")

    @classmethod
    def parse(cls, text: str | Sequence[str]) -> AggregateSpec:
        """From `n=count(), total=sum(amount)` (or a list of such measures); ValueError naming the
        part it cannot read."""
        parts = [text] if isinstance(text, str) else list(text)
        measures = []
        for part in parts:
            for piece in _split(part):
                match = _MEASURE.fullmatch(piece)
                if match is None:
                    raise ValueError(
                        f"cannot read measure {piece.strip()!r}: write NAME=AGGREGATION(FIELD), e.g. total=sum(amount)"
                    )
                name, kind, field = match.groups()
                measures.append(Measure(name, kind, field or None))
        return cls(tuple(measures))

    @property
    def text(self) -> str:
        return ", ".join(m.text for m in self.measures)

    @property
    def value_format(self) -> str:
        """What the registry records as the store's value format."""
        return AGGREGATE_FORMAT_PREFIX + self.text

    @property
    def fields(self) -> tuple[str, ...]:
        """The record fields the measures read, each once, in order."""
        return tuple(dict.fromkeys(m.field for m in self.measures if m.field))

    def identity(self) -> tuple:
        return tuple(m.aggregation.identity() for m in self.measures)

    def merge(self, left: Sequence, right: Sequence) -> tuple:
        return tuple(m.aggregation.merge(a, b) for m, a, b in zip(self.measures, left, right, strict=True))

    def finish(self, accumulators: Sequence) -> dict[str, Any]:
        return {m.name: m.aggregation.finish(a) for m, a in zip(self.measures, accumulators, strict=True)}

    def pack(self, accumulators: Sequence) -> bytes:
        """The stored value: each measure's accumulator bytes (version byte first), length-prefixed."""
        out = bytearray()
        for measure, accumulator in zip(self.measures, accumulators, strict=True):
            data = measure.aggregation.encode(accumulator)
            out += _LENGTH.pack(len(data)) + data
        return bytes(out)

    def unpack(self, data: bytes) -> tuple:
        """The accumulators of a stored value (CodecError when it is not this spec's)."""
        data = bytes(data)
        accumulators, at = [], 0
        for measure in self.measures:
            if at + _LENGTH.size > len(data):
                raise CodecError(f"the value ends before measure {measure.name}: not a value of {self.text}")
            (length,) = _LENGTH.unpack_from(data, at)
            at += _LENGTH.size
            if at + length > len(data):
                raise CodecError(f"measure {measure.name}'s bytes are cut short: not a value of {self.text}")
            accumulators.append(measure.aggregation.decode(data[at : at + length]))
            at += length
        if at != len(data):
            raise CodecError(f"{len(data) - at} bytes after the last measure: not a value of {self.text}")
        return tuple(accumulators)

    def problems(self, accumulators: Sequence) -> list[str]:
        """What the maintenance job's validation finds wrong with one stored value: each
        measure's own checks, and min <= max for a field with both."""
        results = self.finish(accumulators)
        found = [p for m in self.measures for p in m.aggregation.problems(results[m.name])]
        for low in (m for m in self.measures if m.kind == "min"):
            for high in (m for m in self.measures if m.kind == "max" and m.field == low.field):
                a, b = results[low.name], results[high.name]
                if a is not None and b is not None and a > b:
                    found.append(f"{low.name} {a} is above {high.name} {b}")
        return found

    @property
    def codec(self) -> AggregateCodec:
        return AggregateCodec(self)


@dataclass(frozen=True)
class AggregateCodec:
    """The Codec readers use for an aggregate store (statestore.core.codecs.codec_named gives it
    for the registry's value format): a value decodes to {measure: result}; encode takes
    {measure: accumulator} (a measure left out: its identity)."""

    spec: AggregateSpec

    @property
    def name(self) -> str:
        return self.spec.value_format

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, Mapping):
            raise CodecError(f"an aggregate value is a mapping of measure to accumulator, got {type(value).__name__}")
        unknown = sorted(set(value) - {m.name for m in self.spec.measures})
        if unknown:
            raise CodecError(f"no measure {', '.join(unknown)} in {self.spec.text}")
        accumulators = [value.get(m.name, m.aggregation.identity()) for m in self.spec.measures]
        return self.spec.pack(accumulators)

    def decode(self, data: bytes) -> dict[str, Any]:
        return self.spec.finish(self.spec.unpack(data))


def _split(text: str) -> list[str]:
    """`text` cut at the commas between measures (a field never holds one)."""
    return [piece for piece in text.split(",") if piece.strip()]
