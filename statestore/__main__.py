"""`python -m statestore` is the `statestore` CLI."""

import sys

from statestore.cli.main import main

sys.exit(main())
