"""arrow_row: the one-row RecordBatch a Python worker hands back to Spark, the same as
pyarrow's own from_pylist would build, without importing pandas (checked in a child Python,
where nothing imported it before: from_pylist would)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest

from statestore.conn.spark import PROJECT, arrow_row

SCHEMA = pa.schema([("keys", pa.int64()), ("cache_tokens", pa.string()), ("written", pa.int64())])


@pytest.mark.parametrize(
    "row",
    [
        {"keys": 0, "cache_tokens": "", "written": 0},
        {"keys": 2**63 - 1, "cache_tokens": '[[3, "a1"]]', "written": -(2**63)},
        {"keys": 12, "cache_tokens": "größe ✓ 𝄞", "written": -1},
        # ApplyStats of a task with no rows, or of a batch's dead letters: no max_time_ms.
        {"keys": 0, "cache_tokens": None, "written": None},
    ],
)
def test_the_batch_is_what_pyarrow_builds_from_the_row(row):
    built = arrow_row(SCHEMA, row)
    built.validate(full=True)
    assert built.equals(pa.RecordBatch.from_pylist([row], schema=SCHEMA))
    assert built.to_pylist() == [row]


def test_other_column_types_are_refused_by_name():
    schema = pa.schema([("ratio", pa.float64())])
    with pytest.raises(TypeError, match="ratio"):
        arrow_row(schema, {"ratio": 0.5})


def test_neither_it_nor_the_executors_apply_modules_import_pandas():
    child = textwrap.dedent(
        """
        import sys
        import pyarrow as pa
        import statestore.stream.apply, statestore.stream.apply_sessions, statestore.stream.apply_windows
        from statestore.conn.spark import arrow_row
        schema = pa.schema([("keys", pa.int64()), ("cache_tokens", pa.string())])
        batch = arrow_row(schema, {"keys": 5, "cache_tokens": "[]"})
        assert batch.num_rows == 1
        print("pandas" in sys.modules)
        """
    )
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, cwd=PROJECT, check=True)
    assert done.stdout.strip() == "False", done.stderr
