"""Table options of a store's Cassandra table, validated when set and rendered to CQL.

Only a known set of options is accepted, each with a checked value, because option values are
written into CREATE / ALTER TABLE text (CQL cannot bind them as parameters).

Defaults: no default TTL, as the seed library, and UnifiedCompactionStrategy (Cassandra 5's
recommendation for new tables) where the seed has LeveledCompactionStrategy (why: docs/stores.md,
"Compaction"). `compaction="LeveledCompactionStrategy"` gives the seed's schema exactly.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from statestore.core.errors import OptionError

DEFAULT_COMPACTION = "UnifiedCompactionStrategy"
COMPACTION_CLASSES = (
    "LeveledCompactionStrategy",
    "SizeTieredCompactionStrategy",
    "TimeWindowCompactionStrategy",
    "UnifiedCompactionStrategy",
)
# Short names of the compaction classes (Cassandra's own abbreviations).
_COMPACTION_SHORT = {
    "lcs": "LeveledCompactionStrategy",
    "stcs": "SizeTieredCompactionStrategy",
    "twcs": "TimeWindowCompactionStrategy",
    "ucs": "UnifiedCompactionStrategy",
}
# Cassandra's own ceiling for a TTL: 20 years.
MAX_TTL_S = 630_720_000
_SUBOPTION_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
_SUBOPTION_VALUE = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
_COMMENT = re.compile(r"[\w .,:;()/+\-]{0,200}")


def compaction_class(name: str) -> str:
    """The compaction class `name` means: a class of COMPACTION_CLASSES or its short name
    (ucs, lcs, stcs, twcs; any case)."""
    found = _COMPACTION_SHORT.get(name.strip().lower(), name.strip())
    if found not in COMPACTION_CLASSES:
        raise OptionError(
            f"unknown compaction {name!r}: use one of {', '.join(_COMPACTION_SHORT)} or {', '.join(COMPACTION_CLASSES)}"
        )
    return found


def _int_in(name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise OptionError(f"{name} must be a whole number from {low} to {high}, got {value!r}")
    return value


@dataclass(frozen=True)
class TableOptions:
    """Options of a store table. Every field is validated on construction.

    - compaction: a Cassandra compaction class (default UnifiedCompactionStrategy; the seed's
      is LeveledCompactionStrategy);
    - compaction_options: that class's sub-options, e.g. {"scaling_parameters": "T4"};
    - default_time_to_live: seconds after its last write an entry expires (0 = never, default);
    - gc_grace_seconds: how long tombstones are kept (None = Cassandra's default, 10 days);
    - comment: free text shown in the schema (None = the store's description).
    """

    compaction: str = DEFAULT_COMPACTION
    compaction_options: Mapping[str, str] = field(default_factory=dict)
    default_time_to_live: int = 0
    gc_grace_seconds: int | None = None
    comment: str | None = None

    def __post_init__(self) -> None:
        if self.compaction not in COMPACTION_CLASSES:
            raise OptionError(f"unknown compaction {self.compaction!r}: use one of {', '.join(COMPACTION_CLASSES)}")
        options = {}
        for key, value in dict(self.compaction_options).items():
            text = str(value).lower() if isinstance(value, bool) else str(value)
            if not _SUBOPTION_NAME.fullmatch(str(key)) or not _SUBOPTION_VALUE.fullmatch(text):
                raise OptionError(
                    f"invalid compaction option {key!r}={value!r}: names are lower-case words, values "
                    "letters, digits, '.', '_' or '-' (e.g. sstable_size_in_mb=160)"
                )
            options[str(key)] = text
        object.__setattr__(self, "compaction_options", MappingProxyType(options))
        _int_in("default_time_to_live", self.default_time_to_live, 0, MAX_TTL_S)
        if self.gc_grace_seconds is not None:
            _int_in("gc_grace_seconds", self.gc_grace_seconds, 0, MAX_TTL_S)
        if self.comment is not None and not (isinstance(self.comment, str) and _COMMENT.fullmatch(self.comment)):
            raise OptionError("comment: up to 200 letters, digits, spaces and .,:;()/+- (no quotes)")

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None) -> TableOptions:
        """From a mapping such as a DAG param or JSON body; unknown keys are an error. Accepts
        "ttl" for default_time_to_live and numbers given as strings."""
        if raw is None:
            return cls()
        return cls().updated(raw)

    def updated(self, changes: Mapping[str, Any]) -> TableOptions:
        """These options with `changes` applied (same keys and aliases as `parse`)."""
        known = {"compaction", "compaction_options", "default_time_to_live", "gc_grace_seconds", "comment"}
        values: dict[str, Any] = {}
        for key, value in changes.items():
            name = "default_time_to_live" if key == "ttl" else key
            if name not in known:
                raise OptionError(f"unknown table option {key!r}: use {', '.join(sorted(known | {'ttl'}))}")
            if name in ("default_time_to_live", "gc_grace_seconds") and isinstance(value, str) and value.isdigit():
                value = int(value)
            values[name] = value
        return replace(self, **values)

    def with_compaction(self, compaction: str) -> TableOptions:
        """These options with the compaction class `compaction`: a class other than the current
        one starts from its own defaults (the current class's sub-options may not apply to it)."""
        if compaction == self.compaction:
            return self
        return replace(self, compaction=compaction, compaction_options={})

    def cql(self, default_comment: str) -> str:
        """The WITH clause body, e.g. "compaction = {...} AND default_time_to_live = 0"."""
        compaction = {"class": self.compaction, **self.compaction_options}
        body = ", ".join(f"'{k}': '{v}'" for k, v in compaction.items())
        parts = [
            f"compaction = {{{body}}}",
            f"default_time_to_live = {self.default_time_to_live}",
            f"comment = '{self.comment if self.comment is not None else default_comment}'",
        ]
        if self.gc_grace_seconds is not None:
            parts.append(f"gc_grace_seconds = {self.gc_grace_seconds}")
        return " AND ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        return {
            "compaction": self.compaction,
            "compaction_options": dict(self.compaction_options),
            "default_time_to_live": self.default_time_to_live,
            "gc_grace_seconds": self.gc_grace_seconds,
            "comment": self.comment,
        }
