"""spark-submit entry point: audit the partitions of every store (entries, bytes, thresholds).

    spark-submit --master 'local[2]' jobs/audit_partitions.py --report-dir reports/maintenance \
        [--store NAME ...] [--warn-size 100MiB] [--fail-size 400MiB] [--policy fail|warn] [--flush]

All logic lives in statestore.maintenance; `--help` lists every setting. Exit codes: 0 done
(warnings included), 3 a partition over the fail threshold under the fail policy, 2 a
configuration or store error, 1 anything else.
"""

import sys
from collections.abc import Sequence

from statestore.maintenance.main import run


def main(argv: Sequence[str] | None = None) -> int:
    return run("audit_partitions", argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
