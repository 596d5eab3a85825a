"""The `statestore` command line: main (the parser and the feeding and admin commands), queries
(the read commands and `serve`), status (`status`, `describe`), args (what the commands share on
their command lines), exits (exit codes), output (formats) and reference (docs/cli.md)."""
