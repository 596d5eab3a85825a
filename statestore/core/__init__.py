"""Pure vocabulary, no I/O: errors, names, codecs, table options, the partitioner, sorting,
settings (config), the store model and text formatting. Imports nothing of statestore
outside core, so every other wing and every executor can rely on it."""
