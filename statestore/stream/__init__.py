"""The Spark word count: the job (start, run, main); a micro-batch's path on the driver
(batches, position, batch_apply, recording, writer, dead_letters); the replay-safe apply on the
executors (apply and its kinds); the batch transforms, checkpoint checks, the tokenizer, and
the test-only fault switch; your own query into an aggregate store (own_query, whose
start_aggregation this package also offers, imported on first use so that executors importing
the apply's modules do not import the job). Imports core, conn and store."""


def __getattr__(name: str):
    if name == "start_aggregation":
        from statestore.stream.own_query import start_aggregation

        return start_aggregation
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
