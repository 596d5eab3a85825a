"""Sizes as people write them ('100MiB', '400MB', '4096') and as shown to them ('1.5 GiB'). Pure: no I/O.

Durations ('7d', '12h') are read by statestore.core.durations (parse_duration_ms).
"""

from __future__ import annotations

import re

_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)\s*", re.IGNORECASE)
_SIZE_FACTORS = {
    "": 1,
    "b": 1,
    "k": 1024,
    "kb": 1000,
    "kib": 1024,
    "m": 1024**2,
    "mb": 1000**2,
    "mib": 1024**2,
    "g": 1024**3,
    "gb": 1000**3,
    "gib": 1024**3,
    "t": 1024**4,
    "tb": 1000**4,
    "tib": 1024**4,
}
MIB = 1024**2


def parse_size(raw: str | int) -> int:
    """Bytes from '100MiB', '1.5GB', '4096' (KiB/MiB/GiB are powers of 1024, KB/MB/GB of 1000;
    a bare K/M/G means the binary unit, as Cassandra's own settings do)."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        if raw < 0:
            raise ValueError("a size cannot be negative")
        return raw
    match = _SIZE.fullmatch(str(raw))
    if not match or match.group(2).lower() not in _SIZE_FACTORS:
        raise ValueError(f"{raw!r} is not a size: use e.g. 100MiB, 400MB, 1GiB or a number of bytes")
    return int(float(match.group(1)) * _SIZE_FACTORS[match.group(2).lower()])


def human_bytes(size: float | None) -> str:
    if size is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"  # pragma: no cover - the loop returns at GiB
