"""spark-submit entry point: prune versioned history and keep tombstones in check.

    spark-submit --master 'local[2]' jobs/compact_state.py --report-dir reports/maintenance \
        [--store NAME ...] [--history-retention 30d] [--basis stream|processing] \
        [--tombstone-threshold 0.2] [--cassandra-compaction compact|garbagecollect|off] [--dry-run]

Versioned stores lose versions that ended before the retention (the latest always stays)
and keys deleted before it; every store's tombstones are measured before and after, and past
the threshold Cassandra is asked to compact (nodetool over JMX), or the report names the
command. All logic lives in statestore.maintenance. Exit codes: 0 done, 2 a configuration or
store error, 1 anything else.
"""

import sys
from collections.abc import Sequence

from statestore.maintenance.main import run


def main(argv: Sequence[str] | None = None) -> int:
    return run("compact_state", argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
