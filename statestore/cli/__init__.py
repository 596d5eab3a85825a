"""The `statestore` command line: main (the parser and the feeding and admin commands) and
queries (the read commands and `serve`). A front end: every rule lives in store/ or stream/."""
