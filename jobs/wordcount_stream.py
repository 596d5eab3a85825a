"""spark-submit entry point: the streaming word count (Kafka -> Cassandra store).

    spark-submit --jars <kafka connector jars> jobs/wordcount_stream.py \
        --topic lines --store wordcount --checkpoint /path/to/checkpoint [--trigger 10s]

All logic lives in statestore.stream.job; `--help` lists every setting.
"""

import sys

from statestore.stream.job import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
