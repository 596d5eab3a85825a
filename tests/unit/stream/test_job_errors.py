"""How the job says why a stream stopped (job._store_error_message): our own error by its type
when it was raised in this process, and by its class name in Spark's text when it came back
through foreachBatch; any other error is none of ours."""

from __future__ import annotations

import pytest

from statestore.core.errors import KafkaError, StoreFencedError
from statestore.stream import job
from statestore.stream.job import _store_error_message

SPARK_TEXT = (
    "[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function.\n"
    "Traceback (most recent call last):\n"
    '  File "batches.py", line 1, in __call__\n'
    "statestore.core.errors.CheckpointMismatchError: store 's': the checkpoint was replaced\n"
)


def test_our_error_raised_here_is_known_by_its_type():
    assert _store_error_message(StoreFencedError("store 's': fenced off")) == "store 's': fenced off"


def test_our_error_inside_sparks_text_is_pulled_out():
    assert _store_error_message(RuntimeError(SPARK_TEXT)) == "store 's': the checkpoint was replaced"


@pytest.mark.parametrize(
    ("raised", "code"),
    [
        (RuntimeError(SPARK_TEXT), 2),  # a refusal inside a batch: a store error, as before the stream starts
        (StoreFencedError("store 's': fenced off"), 2),
        (RuntimeError("the JVM went away"), 1),
    ],
)
def test_the_exit_code_says_a_store_error_stopped_the_stream(monkeypatch, capsys, raised, code):
    """docs/streaming-job.md: 2 a clear configuration/store error, 1 anything else (issue 45, item 8)."""

    def stopped(_job):
        raise raised

    monkeypatch.setattr(job, "parse_args", lambda argv: None)
    monkeypatch.setattr(job, "run", stopped)
    assert job.main([]) == code
    err = capsys.readouterr().err
    assert ("store 's'" in err) == (code == 2), err


def test_any_other_error_is_none_of_ours():
    assert _store_error_message(KafkaError("topic 't' does not exist")) is None
    assert _store_error_message(RuntimeError("the JVM went away")) is None
