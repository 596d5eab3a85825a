"""The manual's DataFrame examples (docs/dataframe.md) run as written, on a store of the test
keyspace, and read what they say."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

from statestore.store.builder import StoreBuilder

PAGE = Path(__file__).resolve().parents[3] / "docs" / "dataframe.md"


def test_dataframe_examples_run(spark, session, keyspace):
    name = f"doc{uuid.uuid4().hex[:10]}"
    store = StoreBuilder(session, name).with_keyspace(keyspace).partitioned_key_value_store(4).create()
    try:
        store.put_all([("the", 70), ("boats", 14), ("book", 1), ("and", 23)])
        blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
        assert len(blocks) == 2 and all('"sample"' in block for block in blocks)
        namespace: dict = {}
        for n, block in enumerate(blocks):
            # the test keyspace as an option: Spark's Python workers have the environment the
            # session started with, not STATESTORE_KEYSPACE set since
            code = block.replace('"sample"', repr(name)).replace("FROM sample", f"FROM {name}")
            code = code.replace('.option("store", ', f'.option("keyspace", {keyspace!r}).option("store", ')
            exec(compile(code, f"docs/dataframe.md, example {n + 1}", "exec"), namespace)
        assert namespace["df"].count() == 4
        assert namespace["store_frame"](name).filter("key = 'the'").collect()[0]["value"] == 70
        assert spark.sql(f"SELECT sum(value) FROM {name} WHERE key LIKE 'b%'").collect()[0][0] == 15
    finally:
        session.execute(f"DROP TABLE IF EXISTS {keyspace}.{store.spec.table}")
        session.execute(f"DELETE FROM {keyspace}.statestore_stores WHERE name = %s", (name,))
