"""The Spark word count: the job (start, run, main); a micro-batch's path on the driver
(batches, position, batch_apply, recording, writer, dead_letters); the replay-safe apply on the
executors (apply and its kinds); the batch transforms, checkpoint checks, the tokenizer, and
the test-only fault switch. Imports core, conn and store."""
