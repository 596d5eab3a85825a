"""The bookkeeping tables beside the stores: the registry (which stores, their progress), the writer's lease,
the stream log, dead letters, the maintenance history, and the stream status read from them."""
