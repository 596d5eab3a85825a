"""What recording one batch in the stream log costs the driver: StreamMonitor.batch
(the 2-row read of the batch before it for the running sums, and the insert) timed on the local
stack, in its own keyspace (dropped at the end). Beside it, `make bench`'s corpus run with and
without the batch rows (`bench/streaming_compare/streaming_compare.py --systems
partitioned,partitioned-nolog`).

    .venv/bin/python bench/micro/stream_log_cost.py [--batches 300]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

# python puts only this script's folder on the path; bench/ holds bench_common.
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from bench_common import scratch_keyspace

from statestore.store.book.stream_log import BatchRecord
from statestore.store.builder import StoreBuilder
from statestore.stream.monitor import StreamMonitor

KEYSPACE = "bench_stream_log"
WARMUP = 20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=300, help="batches recorded (300; the first 20 untimed)")
    args = parser.parse_args()
    with scratch_keyspace(KEYSPACE) as (config, session):
        store = StoreBuilder(session, "logged").with_keyspace(KEYSPACE).partitioned_key_value_store(4).create()
        monitor = StreamMonitor(config, store.spec)
        monitor.ensure_tables()
        monitor.run_id = "bench"
        monitor.state("running")
        offsets = '{"lines":{"0":1000,"1":1000,"2":1000,"3":1000}}'
        took = []
        for batch in range(args.batches):
            record = BatchRecord(
                batch_id=batch,
                spark_batch_id=batch,
                run_id="bench",
                keys=57_000,
                written=57_000,
                skipped=0,
                words=500_000,
                dead_letters=0,
                seconds=5.0,
                end_offsets=offsets,
                max_event_time_ms=None,
            )
            began = time.perf_counter()
            monitor.batch(record)
            took.append(time.perf_counter() - began)
        timed = sorted(took[WARMUP:])
        print(
            f"stream log per batch ({len(timed)} timed): median {statistics.median(timed) * 1000:.2f} ms, "
            f"p99 {timed[int(len(timed) * 0.99)] * 1000:.2f} ms, mean {statistics.mean(timed) * 1000:.2f} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
