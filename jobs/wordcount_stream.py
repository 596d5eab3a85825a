"""spark-submit entry point: the streaming word count (Kafka -> Cassandra store).

    spark-submit --jars <kafka connector jars> jobs/wordcount_stream.py \
        --topic lines --store wordcount --checkpoint /path/to/checkpoint [--trigger 10s]

With `--input-format json --aggregate 'n=count(), total=sum_int(amount)' --key user` it keeps
those measures per key of JSON records instead (an aggregate store, docs/streaming-job.md).
All logic lives in statestore.stream.job; `--help` lists every setting.
"""

import sys

from statestore.stream.job import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
