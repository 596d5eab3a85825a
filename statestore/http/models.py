"""The JSON bodies of the HTTP API, as pydantic models (they make the OpenAPI document precise).

Keys and values are JSON as the store's codecs decode them: text for `string`, numbers for
`long` and `int`, any JSON for `json`, and lowercase hex text for `bytes` (and custom codecs).
An aggregate store's value (its value codec `aggregate:MEASURES`) is an object of its measures'
results, in their order: {"n": 3, "total": 12.5}.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, JsonValue

StoreTypeName = Literal[
    "partitioned-kv",
    "global-kv",
    "partitioned-versioned",
    "global-versioned",
    "partitioned-window",
    "partitioned-session",
]


class ErrorBody(BaseModel):
    """Every 4xx and 5xx answer: what was wrong and how to fix it."""

    status: int = Field(description="the HTTP status code, repeated")
    error: str = Field(description="the status in words, e.g. 'bad request'")
    detail: str = Field(description="what was wrong, and what to do instead")


class StoreSummary(BaseModel):
    name: str
    type: StoreTypeName
    table: str = Field(description="the Cassandra table holding the entries")
    partitions: int = Field(description="store partitions (Kafka's partitioner on the key bytes); 1 for global types")
    subpartitions: int = Field(1, description="Cassandra partitions per store partition (partitioned types; 1: none)")
    key_codec: str
    value_codec: str


class StoreList(BaseModel):
    keyspace: str
    stores: list[StoreSummary]


class Progress(BaseModel):
    """What the streaming job last recorded for the store (all null for stores the stream never wrote)."""

    last_batch_id: int | None
    last_batch_at: datetime | None
    max_event_time: datetime | None
    source_topic: str | None


class Capabilities(BaseModel):
    range: bool = Field(description="from/to on /entries")
    prefix: bool = Field(description="prefix on /entries")
    reverse: bool = Field(description="reverse=true on /entries")
    history: bool = Field(description="/history/{key} and as_of on /keys/{key}")
    windows: bool = Field(description="/windows (window stores, which have no /keys or /entries)")
    sessions: bool = Field(description="/sessions (session stores, which have no /keys or /entries)")
    entries_order: Literal["key", "token"] = Field(
        description="the order of /entries: key byte order, or Cassandra's token order (global stores)"
    )


class MeasureInfo(BaseModel):
    """One measure of an aggregate store: the field of its values' objects named `name`."""

    name: str
    aggregation: str = Field(description="count, sum, sum_int, min, max, latest or distinct")
    field: str | None = Field(description="the record field it aggregates (nested: a.b); null for count")


class StoreDescription(StoreSummary):
    keyspace: str
    key_syntax: str = Field(description="how to write a key of this store in a URL")
    approximate_entries: int = Field(description="Cassandra's size estimate (flushed data only; 0 before the first)")
    size_nodes_answered: int = Field(description="how many nodes' estimates approximate_entries combines")
    size_nodes_total: int = Field(description="how many nodes the cluster has (fewer answered: an underestimate)")
    retention_ms: int | None = Field(
        default=None, description="entries dated this long before the stream time are absent; null: no retention"
    )
    progress: Progress
    supports: Capabilities
    measures: list[MeasureInfo] | None = Field(
        default=None,
        description="an aggregate store's measures, the fields of each value's object, in order; null: values "
        "are not aggregates",
    )


class Record(BaseModel):
    """One key's value (an aggregate store's: an object of its measures); valid_from / valid_to
    (epoch ms) are set for versioned stores only."""

    key: JsonValue
    value: JsonValue
    valid_from: int | None = None
    valid_to: int | None = Field(default=None, description="null: still current")


class KeyValue(BaseModel):
    key: JsonValue
    value: JsonValue


class EntriesPage(BaseModel):
    entries: list[KeyValue]
    order: Literal["key", "token"] = Field(description="key byte order (partitioned stores) or token order (global)")
    next_page_token: str | None = Field(
        description="pass as page_token, with the same from/to/prefix/reverse, for the next page; null: no more"
    )


class Version(BaseModel):
    value: JsonValue = Field(description="null: the key was deleted during this interval")
    valid_from: int = Field(description="epoch ms, inclusive")
    valid_to: int | None = Field(description="epoch ms, exclusive; null: still current")


class History(BaseModel):
    key: JsonValue
    versions: list[Version] = Field(description="oldest first")
    next_from: int | None = Field(
        description="more versions follow: pass this as `from` (with the same `to`) for them; null: no more"
    )


class Window(BaseModel):
    key: JsonValue
    window_start: int = Field(description="epoch ms, inclusive")
    window_end: int = Field(description="epoch ms, exclusive")
    value: JsonValue = Field(
        description="the window's value: the count, for the windowed word count; a window aggregate store's: an "
        "object of its measures, in their order"
    )


class WindowsPage(BaseModel):
    windows: list[Window] = Field(description="by key byte order, then window start")
    next_page_token: str | None = Field(
        description="pass as page_token, with the same key/from/to, for the next page; null: no more"
    )


class SessionWindow(BaseModel):
    key: JsonValue
    session_start: int = Field(description="epoch ms of the session's first event, inclusive")
    session_end: int = Field(description="epoch ms of the session's last event, inclusive")
    value: JsonValue = Field(
        description="the session's value: its event count, for the sessioned word count; a session aggregate "
        "store's: an object of its measures, in their order"
    )


class SessionsPage(BaseModel):
    sessions: list[SessionWindow] = Field(description="by key byte order, then session end")
    next_page_token: str | None = Field(
        description="pass as page_token, with the same key, for the next page; null: no more"
    )
