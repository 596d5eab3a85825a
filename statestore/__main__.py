"""`python -m statestore` is the `statestore` CLI."""

import sys

from statestore.cli import main

sys.exit(main())
