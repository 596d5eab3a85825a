"""The store library: the builder, the four store kinds (key-value, versioned, window, session) on one
base (handle) with codecs and the read cache, provisioning, table statistics and admin, where every
store rule the front ends use lives. tables/ holds one module per store type that owns its CQL (with
the pieces they share: base, segmented, paging, unlogged); book/ the bookkeeping tables (registry,
lease, stream log, dead letters, maintenance history) and the stream status read from them. Imports
core and conn."""
