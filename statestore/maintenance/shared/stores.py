"""The stores a maintenance job runs over: the ones named (each looked up in the registry, an
unknown name refused before any work) or, with none named, every store of the keyspace."""

from __future__ import annotations

from statestore.core.model import StoreSpec
from statestore.store import admin
from statestore.store.book import registry


def stores_to_run(session, keyspace: str, names: list[str] | None) -> list[StoreSpec]:
    """The specs of `names`, or of every store of `keyspace` when `names` is empty or None."""
    if names:
        return [registry.lookup(session, keyspace, name) for name in names]
    return [listing.spec for listing in admin.list_stores(session, keyspace)]
