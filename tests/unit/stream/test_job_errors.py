"""How the job says why a stream stopped (job._store_error_message): our own error by its type
when it was raised in this process, and by its class name in Spark's text when it came back
through foreachBatch; any other error is none of ours."""

from __future__ import annotations

from statestore.core.errors import KafkaError, StoreFencedError
from statestore.stream.job import _store_error_message


def test_our_error_raised_here_is_known_by_its_type():
    assert _store_error_message(StoreFencedError("store 's': fenced off")) == "store 's': fenced off"


def test_our_error_inside_sparks_text_is_pulled_out():
    spark_text = (
        "[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function.\n"
        "Traceback (most recent call last):\n"
        '  File "batches.py", line 1, in __call__\n'
        "statestore.core.errors.CheckpointMismatchError: store 's': the checkpoint was replaced\n"
    )
    assert _store_error_message(RuntimeError(spark_text)) == "store 's': the checkpoint was replaced"


def test_any_other_error_is_none_of_ours():
    assert _store_error_message(KafkaError("topic 't' does not exist")) is None
    assert _store_error_message(RuntimeError("the JVM went away")) is None
