"""The query side shared by the CLI and the HTTP API: keys typed as text, values shown to people.

A key on a command line or in a URL is text; the store's key codec says how to read it:
`string` as is, `long` and `int` as decimal integers, `json` as JSON text, `bytes` (and custom
codecs, which readers see as bytes) as hex. Values come back decoded; bytes are shown as hex so
every value has a JSON form.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Sequence
from itertools import chain, islice
from typing import Any, TextIO

from statestore.core.codecs import Codec
from statestore.core.errors import CodecError, UnsupportedOperationError

_TABLE_WIDTH_ROWS = 1000
_KEY_SYNTAX = {
    "string": "any text",
    "long": "a decimal integer (64-bit)",
    "int": "a decimal integer (32-bit)",
    "json": 'JSON text, e.g. "word", 42 or {"id": 1}',
    "bytes": "hex digits, e.g. 0a1b",
}


def key_syntax(codec: Codec) -> str:
    """How a key of `codec` is written as text (for help and error messages)."""
    return _KEY_SYNTAX.get(codec.name, _KEY_SYNTAX["bytes"])


# How deeply a JSON key given as text may nest: far beyond any real key, far below what
# Python's parser and encoder can take without running out of stack.
MAX_KEY_DEPTH = 64


def _within_depth(value: Any) -> None:
    """CodecError when a parsed JSON key nests deeper than MAX_KEY_DEPTH (checked without recursion)."""
    level = [value]
    for _ in range(MAX_KEY_DEPTH + 1):
        level = [
            inner
            for item in level
            if isinstance(item, dict | list)
            for inner in (item.values() if isinstance(item, dict) else item)
        ]
        if not level:
            return
    raise CodecError(f"the json key is nested deeper than {MAX_KEY_DEPTH} levels")


def parse_key(text: str, codec: Codec) -> Any:
    """The key `text` stands for under `codec`; CodecError names the expected syntax."""
    try:
        if codec.name == "string":
            return text
        if codec.name in ("long", "int"):
            value = int(text.strip(), 10)
        elif codec.name == "json":
            value = json.loads(text)
        else:
            value = bytes.fromhex(text)
    except RecursionError:
        raise CodecError(f"the {codec.name} key is nested deeper than {MAX_KEY_DEPTH} levels") from None
    except ValueError:
        raise CodecError(f"{text[:200]!r} is not a {codec.name} key: write {key_syntax(codec)}") from None
    if codec.name == "json":
        _within_depth(value)
    codec.encode(value)  # range checks (a long past 64 bits) fail here, with the codec's message
    return value


def to_json(value: Any) -> Any:
    """A decoded key or value as JSON data: bytes become hex text, everything else is already JSON."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    return value


def to_text(value: Any) -> str:
    """A decoded key or value as one cell of text: strings as they are, numbers in decimal,
    bytes in hex, JSON values as compact JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def versioned(store) -> bool:
    return store.spec.store_type.versioned


def require_versioned(store, operation: str) -> None:
    """Refuse `operation` (history, as-of reads) on a store that keeps only latest values."""
    if not versioned(store):
        raise UnsupportedOperationError(
            f"store '{store.spec.name}' is a {store.spec.store_type.value} store and keeps only each key's "
            f"latest value, so it has no {operation}; use a partitioned-versioned or global-versioned store"
        )


def _cell(value: Any) -> str:
    return "" if value is None else to_text(value)


def emit(rows: Iterable[Sequence], header: Sequence[str], fmt: str, out: TextIO) -> int:
    """Write `rows` (JSON-able cells) as a table, CSV or JSON lines; returns how many.

    The table's column widths come from its first rows, so a long scan streams out instead of
    waiting for its end; a later, longer cell just pushes its line wider.
    """
    count = 0
    if fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(header)
        for row in rows:
            writer.writerow([_cell(v) for v in row])
            count += 1
    elif fmt == "jsonl":
        for row in rows:
            out.write(json.dumps(dict(zip(header, map(to_json, row), strict=True)), ensure_ascii=False) + "\n")
            count += 1
    else:  # table
        rows = iter(rows)
        first = [[_cell(v) for v in row] for row in islice(rows, _TABLE_WIDTH_ROWS)]
        widths = [max([len(h)] + [len(r[i]) for r in first]) for i, h in enumerate(header)]

        def line(cells: Sequence[str]) -> str:
            return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip() + "\n"

        out.write(line(header))
        for cells in chain(first, ([_cell(v) for v in row] for row in rows)):
            out.write(line(cells))
            count += 1
    return count
