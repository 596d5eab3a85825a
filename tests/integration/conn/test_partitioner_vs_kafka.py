"""The partitioner against Kafka's own Java code, on random keys of every length."""

import random
import subprocess
from pathlib import Path

from statestore.core.partitioner import murmur2, partition_for
from tests.corpus import VOCABULARY

HERE = Path(__file__).resolve().parent
KAFKA_LIB = HERE.parents[2] / ".stack" / "lib" / "kafka"


def test_murmur2_agrees_with_kafka_utils():
    rng = random.Random(42)
    keys = [w.encode("utf-8") for w in VOCABULARY]
    keys += [rng.randbytes(n) for n in range(0, 64) for _ in range(5)]
    keys += [rng.randbytes(rng.randint(64, 5000)) for _ in range(50)]
    result = subprocess.run(
        ["java", "-cp", f"{KAFKA_LIB}/*", str(HERE / "KafkaMurmur2.java")],
        input="\n".join(k.hex() for k in keys) + "\n",
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    kafka = [int(x) for x in result.stdout.split()]
    assert len(kafka) == len(keys)
    assert [murmur2(k) for k in keys] == kafka
    # ...and therefore the partition any Kafka producer would choose.
    assert [partition_for(k, 12) for k in keys] == [(h & 0x7FFFFFFF) % 12 for h in kafka]
