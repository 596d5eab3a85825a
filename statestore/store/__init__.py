"""The store library: the builder, the four store kinds (key-value, versioned, window, session) with
codecs and the read cache, provisioning, table statistics and admin, where every store rule the front
ends use lives. tables/ holds one module per store type that owns its CQL; book/ the bookkeeping
tables (registry, lease, stream log, dead letters, maintenance history, status). Imports core and conn."""
