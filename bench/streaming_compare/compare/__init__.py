"""The side-by-side benchmark's parts (streaming_compare.py beside this package runs it): our job
next to Spark's own state stores on one corpus.

  systems      the five systems, each started the same way on a topic
  worker       one system's phases in its own process (`python -m compare.worker`)
  experiments  changes to our job tried out here first, as statestore BatchSeams
  profile      the instrumented run of our job (driver steps, executor phases, cProfile)
  feed         producing the input to Kafka while recording where every message landed
  events       the aggregate run's JSON events, their ground truths (per user, per user and
               window) and their checks (--aggregate)
  metrics      pure arithmetic of progress events and the record index
  report       figures, ratios, targets and the Markdown report
  plots        PNG plots
"""
