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
- `truncate`: deletes entries, dead letters and progress; refused while a stream writes the store,
  and (global, window and session stores) while a batch is begun and never recorded unless
  **writer_stopped** says its writer is stopped for good.
- `drop` (confirm): drops the store's tables; **confirm** must repeat the store's name;
  refused while a stream writes the store.

Options: `ttl` (seconds, 0 = none), `compaction`, `compaction_options`, `gc_grace_seconds`,
`comment`. Mistakes (a bad name or option, a missing confirmation, an unknown store) fail
the task at once, without retries; an unreachable Cassandra or a busy store is retried.
"""

ACTIONS = ["list", "create", "describe", "alter", "truncate", "drop"]
CODECS = ["string", "long", "int", "bytes", "json"]

with DAG(
    dag_id="state_store_admin",
    description="Manage the Cassandra state stores: create, describe, alter, truncate, drop",
    doc_md=DOC,
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    tags=["statestore", "admin"],
    default_args={"retries": 1, "retry_delay": timedelta(seconds=30), "owner": "statestore"},
    params={
        "action": Param("describe", type="string", enum=ACTIONS, title="Action"),
        "store": Param(
            None,
            type=["null", "string"],
            pattern=r"^[a-z][a-z0-9_]{0,31}$",
            title="Store",
            description="every action but list needs one",
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
        "key_codec": Param("string", type="string", enum=CODECS, title="Key codec (create)"),
        "value_codec": Param("long", type="string", enum=CODECS, title="Value codec (create)"),
        "writer_stopped": Param(
            False,
            type="boolean",
            title="Writer stopped for good (truncate)",
            description="the store's last writer cannot wake up: truncate a global, window or session store "
            "whose last batch was never recorded",
        ),
        "confirm": Param(
            "",
            type="string",
            title="Confirmation (drop)",
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
                )
            elif action == "alter":
                hook.alter_store(store, params["options"])
            elif action == "truncate":
                hook.truncate_store(store, writer_stopped=params["writer_stopped"])
            elif action == "drop":
                spec = hook.drop_store(store, params["confirm"])
                return {"dropped": spec.name, "table": spec.table}
            # Every action but drop answers with the store as it is now.
            return hook.describe_store(store, count_partitions=action == "describe").as_dict()

    run_action()
