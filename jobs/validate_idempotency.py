"""spark-submit entry point: check a word-count or aggregate store against its input.

    spark-submit --master 'local[2]' --jars <kafka connector jars> jobs/validate_idempotency.py \
        --report-dir reports/maintenance --store NAME [--checkpoint PATH --replay-batches 3] \
        [--starting-offsets earliest] [--no-quality]

Recounts the input topic up to the committed offsets and compares every key with the store (an
aggregate store's measure by measure, read with the input settings it records); replays the
last batches on a shadow copy (word-count stores, with --checkpoint); runs a Great Expectations
suite with Data Docs under <report-dir>/data_docs. All logic lives in statestore.maintenance.
Exit codes: 0 passed, 3 the store differs (the message names the first keys), 2 a
configuration or store error (e.g. the store kept changing), 1 anything else.
"""

import sys
from collections.abc import Sequence

from statestore.maintenance.main import run


def main(argv: Sequence[str] | None = None) -> int:
    return run("validate_idempotency", argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
