"""Records of a producer's aborted Kafka transaction are not input: the stream reads
`read_committed` (KafkaConfig.isolation_level) and counts only what was committed."""

from __future__ import annotations

import uuid
from collections import Counter

import pytest
from confluent_kafka import Producer

from tests.corpus import generate
from tests.integration.conftest import dump, produce_lines, run_stream


def _transaction(kafka_config, topic: str, lines: list[str], commit: bool) -> None:
    producer = Producer(
        {
            "bootstrap.servers": kafka_config.bootstrap_servers,
            "transactional.id": f"it-tx-{uuid.uuid4().hex[:8]}",
        }
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for line in lines:
        producer.produce(topic, value=line.encode("utf-8"))
    producer.flush(30)  # the records are in the log before the transaction ends
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)


# 1000: the batch is applied by the driver; 0: by Spark tasks.
@pytest.mark.parametrize("driver_apply_records", [1000, 0])
def test_an_aborted_transaction_is_not_counted(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path, driver_apply_records
):
    plain, truth = generate(60, seed=28)
    committed = ["alpha beta", "alpha delta"]
    # Words of the aborted transaction are nowhere else in the input.
    _transaction(kafka_config, topic, ["ghost phantom", "ghost"] * 20, commit=False)
    _transaction(kafka_config, topic, committed, commit=True)
    produce_lines(kafka_config, topic, plain)
    # An aborted transaction last: the partitions end in records the reader must skip.
    _transaction(kafka_config, topic, ["phantom"] * 8, commit=False)
    run_stream(
        spark,
        cassandra_config,
        kafka_config,
        topic,
        store_name,
        tmp_path / "cp",
        driver_apply_records=driver_apply_records,
    )
    expected = truth + Counter(" ".join(committed).split())
    assert dump(session, keyspace, store_name) == dict(expected)
