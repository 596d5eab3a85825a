"""Validation of names that end up inside CQL or Kafka, and the store -> table function.

CQL identifiers cannot be bound as parameters, so every name that reaches a statement is
checked here first against a strict pattern: nothing outside it can inject CQL.
"""

from __future__ import annotations

import re

from statestore.core.errors import InvalidNameError

# Cassandra folds unquoted identifiers to lower case and limits table names to 48
# characters; 32 leaves room for the longest suffix below ("_deadletters").
STORE_NAME_MAX = 32
_STORE_NAME = re.compile(rf"[a-z][a-z0-9_]{{0,{STORE_NAME_MAX - 1}}}")
_KEYSPACE_NAME = re.compile(r"[a-z][a-z0-9_]{0,47}")
# Kafka's own rule: ASCII letters, digits, '.', '_' and '-', at most 249 characters, not '.' or '..'.
_TOPIC_NAME = re.compile(r"(?!\.\.?\Z)[A-Za-z0-9._-]{1,249}")

STORE_TABLE_SUFFIX = "_store"
DEADLETTER_TABLE_SUFFIX = "_deadletters"


def _checked(name: str, pattern: re.Pattern[str], what: str, rule: str) -> str:
    """`name` when it is text that `pattern` matches whole; else InvalidNameError naming `what` and its `rule`."""
    if not isinstance(name, str) or not pattern.fullmatch(name):
        raise InvalidNameError(f"invalid {what} {name!r}: {rule}")
    return name


def validate_store_name(name: str) -> str:
    return _checked(
        name,
        _STORE_NAME,
        "store name",
        f"use 1-{STORE_NAME_MAX} characters, lower-case ASCII letters, digits and '_', starting with a letter "
        "(e.g. 'wordcount')",
    )


def validate_keyspace(name: str) -> str:
    return _checked(
        name,
        _KEYSPACE_NAME,
        "keyspace",
        "use 1-48 characters, lower-case ASCII letters, digits and '_', starting with a letter",
    )


def validate_topic(name: str) -> str:
    return _checked(name, _TOPIC_NAME, "Kafka topic", "use 1-249 ASCII letters, digits, '.', '_' or '-'")


def validate_table_name(name: str) -> str:
    """A table name a table-name function produced: a safe, unquoted CQL identifier."""
    return _checked(
        name,
        _KEYSPACE_NAME,
        "table name",
        "a table-name function must return 1-48 lower-case ASCII letters, digits and '_', starting with a letter",
    )


def store_table(store: str) -> str:
    """The table holding a store's entries: the store name plus '_store'."""
    return validate_store_name(store) + STORE_TABLE_SUFFIX


# A store moved to a new table (a reset that cannot shadow a paused writer's late entries,
# statestore.store.admin.truncate_store; a re-layout, statestore.store.relayout) gets its first
# table's name plus this suffix and a generation number.
GENERATION_SUFFIX = "_r"
_GENERATION = re.compile(rf"(?P<base>.+?)(?:{GENERATION_SUFFIX}(?P<generation>[1-9][0-9]*))?")


def table_generation(table: str) -> tuple[str, int]:
    """The table a store started with and its generation: ('s_store', 2) for 's_store_r2',
    ('s_store', 0) for 's_store'."""
    match = _GENERATION.fullmatch(table)
    return match["base"], int(match["generation"] or 0)


def next_generation_table(table: str) -> str | None:
    """The generation after `table`'s, or None when that name would not be a valid table name
    (over 48 characters)."""
    base, generation = table_generation(table)
    following = f"{base}{GENERATION_SUFFIX}{generation + 1}"
    return following if _KEYSPACE_NAME.fullmatch(following) else None


def deadletter_table(store: str) -> str:
    """The table holding the input a store's stream could not count."""
    return validate_store_name(store) + DEADLETTER_TABLE_SUFFIX
