"""The Spark word count: the job (start, run, main), the micro-batch bookkeeping (batches),
the replay-safe apply, the batch transforms, checkpoint checks, the tokenizer, and the
test-only fault switch. Imports core, conn and store."""
