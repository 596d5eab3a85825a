"""The store library: the builder, key-value and versioned stores with codecs and the read
cache, the registry, provisioning, the writer's lease, dead letters, table statistics and
admin, where every store rule the front ends use lives. tables/ holds one module per store
type that owns its CQL. Imports core and conn."""
