"""spark-submit entry point: delete store entries older than a retention.

    spark-submit --master 'local[2]' jobs/expire_state.py --report-dir reports/maintenance \
        --store NAME [--store ...] --retention 30d [--basis stream|processing] [--dry-run] [--table-ttl 90d]

Stream basis (default): an entry expires when its event time is older than the stream's latest
event time minus the retention; processing basis: when its last write is older than now minus
the retention. Updates racing the delete win (deletes carry the write time read). All logic
lives in statestore.maintenance; `--help` lists every setting. Exit codes: 0 done, 2 a
configuration or store error, 1 anything else.
"""

import sys
from collections.abc import Sequence

from statestore.maintenance.main import run


def main(argv: Sequence[str] | None = None) -> int:
    return run("expire_state", argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
