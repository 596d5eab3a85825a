"""state_store_admin: list, create, describe, alter, truncate or drop a state store, on demand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow.sdk import DAG, Param, task
from statestore_airflow import dag_support

DOC = """
### State store administration

Trigger with parameters: **action** and **store**, plus what the action needs. Every rule
(names, option values, codecs, the lease, the confirmation) is the library's
(`statestore.store.admin`); this DAG only routes the request to `CassandraStateStoreHook`
(connection `statestore_cassandra`, keyspace in its *schema*). The result is the task's
return value (XCom) and is logged.

- `list`: the stores of the keyspace with their progress.
- `create` (store_type, partitions, options, key_codec, value_codec): registers the store and
  creates its table; idempotent for the same layout.
- `describe`: schema, table options (TTL, compaction), size estimate, largest partition,
  entries per store partition (an exact count that reads the whole table), progress, writer.
- `alter` (options): changes table options, e.g. `{"ttl": 86400}` or
  `{"compaction": "SizeTieredCompactionStrategy"}`.
- `truncate`: deletes entries, dead letters and progress; refused while a stream writes the store.
  A global, window or session store whose last batch was begun and never recorded moves to a
  new table (`<store>_store_rN`) so a paused writer's late entries land nowhere, unless
  **writer_stopped** says its writer is stopped for good (then truncated in place). A truncate
  holds the store until it has finished; one whose process is gone leaves it held (every writer
  refused, naming it) until a truncate with **writer_stopped** takes it over and finishes.
- `set_retention` (retention): sets a key-value or versioned store's retention (`7d`, `12h`, ...;
  `none` removes it): entries dated that long before the stream time are absent to every reader
  and counted from zero by the stream; the expire job reclaims them. `create` takes it too.
- `relayout` (subpartitions): copies a partitioned-kv or partitioned-versioned store (every
  version of every key) into a new table with that many sub-partitions per partition, verifies
  the copy (counts and a checksum), switches the store to it and keeps the old table as the way
  back; refused while a stream writes the store (stop it first). `create` takes
  **subpartitions** too (default 1: the seed's table).
- `drop_old_table` (table, confirm): drops the table a re-layout left behind, once the new one
  is trusted; **confirm** must repeat the store's name.
- `migrate`: brings stores made by an earlier release of the library up to this release's schema
  version (the stream refuses them until then), and turns a hopping window count store a stream
  writes into panes (copied, verified, switched; the old table kept, `drop_old_table` drops it);
  without **store**, every store of the keyspace. Idempotent; refused while a stream writes a
  store that needs it (stop the stream first).
- `drop` (confirm): drops the store's tables; **confirm** must repeat the store's name;
  refused while a stream writes the store, and while its last batch was begun and never
  recorded, or a truncate cleared such a batch (a paused writer would write the rest into a
  store made again under the name), unless **writer_stopped** says its writer is stopped for
  good (a truncate with it forgets the cleared batch too).

Options: `ttl` (seconds, 0 = none), `compaction`, `compaction_options`, `gc_grace_seconds`,
`comment`. Mistakes (a bad name or option, a missing confirmation, an unknown store) fail
the task at once, without retries; an unreachable Cassandra or a busy store is retried.
"""

ACTIONS = [
    "list",
    "create",
    "describe",
    "alter",
    "set_retention",
    "truncate",
    "relayout",
    "drop_old_table",
    "migrate",
    "drop",
]
CODECS = ["string", "long", "int", "bytes", "json"]

with DAG(
    dag_id="state_store_admin",
    description="Manage the Cassandra state stores: create, describe, alter, truncate, drop",
    doc_md=DOC,
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    is_paused_upon_creation=False,  # it runs only when triggered; paused, a triggered run waits queued
    tags=["statestore", "admin"],
    default_args={"retries": 1, "retry_delay": timedelta(seconds=30), "owner": "statestore"},
    params={
        "action": Param("describe", type="string", enum=ACTIONS, title="Action"),
        "store": Param(
            None,
            type=["null", "string"],
            pattern=r"^[a-z][a-z0-9_]{0,31}$",
            title="Store",
            description="every action but list and migrate needs one",
        ),
        "store_type": Param(
            "partitioned-kv",
            type="string",
            enum=["partitioned-kv", "global-kv", "partitioned-versioned", "global-versioned"],
            title="Store type (create)",
        ),
        "partitions": Param(4, type="integer", minimum=1, maximum=4096, title="Store partitions (create)"),
        "options": Param(
            {},
            type="object",
            title="Table options (create, alter)",
            description='e.g. {"ttl": 86400, "compaction": "LeveledCompactionStrategy"}',
        ),
        "subpartitions": Param(
            1,
            type="integer",
            minimum=1,
            maximum=1024,
            title="Sub-partitions per partition (create, relayout)",
            description="partitioned-kv and -versioned: each partition spread over this many Cassandra partitions "
            "by a hash of the key (1: the seed's table)",
        ),
        "table": Param(
            None,
            type=["null", "string"],
            pattern=r"^[a-z][a-z0-9_]{0,47}$",
            title="Old table (drop_old_table)",
            description="the table a re-layout left behind, as its result named it",
        ),
        "key_codec": Param("string", type="string", enum=CODECS, title="Key codec (create)"),
        "value_codec": Param("long", type="string", enum=CODECS, title="Value codec (create)"),
        "retention": Param(
            None,
            type=["null", "string"],
            pattern=r"^(none|[0-9]+(ms|s|m|h|d))$",
            title="Retention (create, set_retention)",
            description="e.g. 7d or 12h: entries dated that long before the stream time are absent; none removes it",
        ),
        "writer_stopped": Param(
            False,
            type="boolean",
            title="Writer stopped for good (truncate, drop)",
            description="no earlier writer or reset of the store is still running: truncate takes over the "
            "lease an unfinished reset left behind, and truncates a global, window or session store whose last "
            "batch was never recorded in place, instead of moving it to a new table; drop a store whose last "
            "batch was never recorded, or whose such batch a truncate cleared",
        ),
        # Optional on the form (a required field keeps Trigger disabled while empty, for every
        # action); drop and drop_old_table check it when they run (the library's rule).
        "confirm": Param(
            None,
            type=["null", "string"],
            title="Confirmation (drop, drop_old_table)",
            description="type the store's name to drop it",
        ),
    },
) as dag:

    @task
    def run_action(params: dict):
        """Route the chosen action to the hook; return its result as plain JSON."""
        from statestore_airflow.hook import CassandraStateStoreHook

        from statestore.core.errors import ConfigError

        hook = CassandraStateStoreHook(dag_support.CASSANDRA_CONN_ID)
        action, store = params["action"], params["store"]
        with dag_support.fail_without_retry():
            if action == "list":
                return [
                    {
                        "store": s.spec.name,
                        "type": s.spec.store_type.value,
                        "partitions": s.spec.partitions,
                        "last_batch_id": s.progress.last_batch_id,
                    }
                    for s in hook.list_stores()
                ]
            if action == "migrate":
                return [migration.as_dict() for migration in hook.migrate(store or None)]
            if not store:
                raise ConfigError(f"action '{action}' needs a store: set the 'store' parameter")
            if action == "create":
                hook.create_store(
                    store,
                    params["store_type"],
                    params["partitions"],
                    params["options"],
                    params["key_codec"],
                    params["value_codec"],
                    retention=params.get("retention"),
                    subpartitions=params.get("subpartitions", 1),
                )
            elif action == "set_retention":
                if params.get("retention") is None:
                    raise ConfigError("action 'set_retention' needs a retention: a duration such as 7d, or none")
                hook.set_retention(store, params["retention"])
            elif action == "alter":
                hook.alter_store(store, params["options"])
            elif action == "truncate":
                hook.truncate_store(store, writer_stopped=params["writer_stopped"])
            elif action == "relayout":
                return hook.relayout_store(store, params["subpartitions"]).as_dict()
            elif action == "drop_old_table":
                return {"dropped": hook.drop_old_table(store, params.get("table") or "", params["confirm"])}
            elif action == "drop":
                spec = hook.drop_store(store, params["confirm"], writer_stopped=params["writer_stopped"])
                return {"dropped": spec.name, "table": spec.table}
            # Every action but drop answers with the store as it is now.
            return hook.describe_store(store, count_partitions=action == "describe").as_dict()

    run_action()
