"""The replay-overhead benchmark's parts (replay_overhead.py beside this package runs it): the
word count with and without its replay-safety machinery, side by side.

  counter  the baseline's apply: blind counter increments (shipped to executors by value)
  seams    each run's statestore BatchSeams: which apply, which dead-letter step, its clocks
  runs     one measured run (Bench) and its figures (RunResult)
  report   medians, ratios and the Markdown report
"""

# The variants a run can measure (--variants).
VARIANTS = ("replay-safe", "counter", "global", "counter-global")
# (replay-safe variant, its baseline): the same store layout with and without replay safety.
PAIRS = (("replay-safe", "counter"), ("global", "counter-global"))
GLOBAL_LAYOUT = ("global", "counter-global")  # the variants on a global-kv layout
SHORT = {"replay-safe": "r", "counter": "c", "global": "g", "counter-global": "cg"}  # in store names
