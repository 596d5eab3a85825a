"""The apply job tells whether a batch has dead letters (ApplyStats.uncountable), so only a
batch that has some pays for writing them: each kind alone must still reach the dead-letter
table, and a clean batch must run no dead-letter job."""

from __future__ import annotations

import datetime as dt
from functools import partial

import pytest

from statestore.core.model import MAX_KEY_BYTES
from statestore.store.book import deadletters
from statestore.stream import dead_letters, job
from statestore.stream.apply import UNCOUNTABLE
from statestore.stream.transforms import batch_deltas, dead_letter_rows
from statestore.stream.writer import BatchSeams
from tests.integration import conftest
from tests.integration.conftest import dump, produce_lines, run_stream

LONG_WORD = "x" * (MAX_KEY_BYTES + 1)
# 2 bytes of UTF-8 each, 3 once lower-cased (U+023A -> U+2C65): the message is under the key
# limit, the word the tokenizer makes of it is over.
GROWS_WHEN_LOWERED = "\u023a" * (MAX_KEY_BYTES // 3 + 1)
KINDS = {  # one message of each kind, among ordinary ones
    "null value": (None, 1),
    "invalid UTF-8": (b"bad \xff\xfe bytes", 1),
    "a word over the key limit": (f"one {LONG_WORD} two {LONG_WORD}".encode(), 2),
    "a word over the key limit once lower-cased": (f"one {GROWS_WHEN_LOWERED}".encode(), 1),
}


@pytest.fixture
def dead_letter_jobs(monkeypatch) -> list[int]:
    """The batch ids of the dead-letter jobs that streams started by run_stream run, in order.

    The job calls its dead-letter step through its seams (BatchSeams.dead_letters), which hold
    the function itself: patching statestore.stream.dead_letters.write_dead_letters never
    reaches it. So run_stream's `start` gets seams whose step records the batch, then writes
    the dead letters as shipped."""
    jobs: list[int] = []

    def recorded(session, batch_df, spec, batch_id, **late):
        jobs.append(batch_id)
        return dead_letters.write_dead_letters(session, batch_df, spec, batch_id, **late)

    monkeypatch.setattr(conftest, "start", partial(job.start, seams=BatchSeams(dead_letters=recorded)))
    return jobs


def _records(spark, values):
    at = dt.datetime(2026, 11, 23, 12, 0, 0)
    rows = [("t", 0, offset, at, value) for offset, value in enumerate(values)]
    return spark.createDataFrame(rows, "topic string, partition int, offset long, timestamp timestamp, value binary")


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kind_of_dead_letter_is_counted_as_uncountable(spark, kind):
    value, expected = KINDS[kind]
    records = _records(spark, [b"good words", value, b"more good words"])
    with_letters = {r.word: r.delta for r in batch_deltas(records, with_uncountable=True).collect()}
    assert with_letters.pop(UNCOUNTABLE) == expected
    plain = {r.word: r.delta for r in batch_deltas(records).collect()}
    assert with_letters == plain and UNCOUNTABLE not in plain
    assert dead_letter_rows(records).count() == 1  # what the uncountable count stands for


def test_a_clean_batch_has_no_uncountable_row(spark):
    records = _records(spark, [b"good words", b"", "café, naïve!".encode()])
    assert UNCOUNTABLE not in {r.word for r in batch_deltas(records, with_uncountable=True).collect()}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_batch_whose_only_dead_letter_is_of_one_kind_writes_it(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path, kind, dead_letter_jobs
):
    produce_lines(kafka_config, topic, [b"alpha beta", KINDS[kind][0], b"beta"])
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp")
    assert len(dead_letter_jobs) == 1  # the batch holding the dead letter ran the job: the fixture sees it
    letters = list(deadletters.read_all(session, keyspace, store_name))
    assert len(letters) == 1 and letters[0].raw == KINDS[kind][0]
    neighbours = {  # the message's other words are still counted
        "a word over the key limit": {"one": 1, "two": 1},
        "a word over the key limit once lower-cased": {"one": 1},
    }.get(kind, {})
    assert dump(session, keyspace, store_name) == {"alpha": 1, "beta": 2, **neighbours}


def test_a_clean_batch_runs_no_dead_letter_job(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path, dead_letter_jobs
):
    """The test above shows dead_letter_jobs hears the job's dead-letter step; here it must stay silent."""
    produce_lines(kafka_config, topic, [b"alpha beta", b"beta"])
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp")
    assert dump(session, keyspace, store_name) == {"alpha": 1, "beta": 2}
    assert dead_letter_jobs == []
