"""What every maintenance job uses: token-range scans, pure selectors, which stores a job covers, report
files, units, and what Cassandra's own tools say about a table."""
