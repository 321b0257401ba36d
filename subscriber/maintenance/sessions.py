"""The SQL settings of a store's Spark sessions: the store's own (subscriber.store.delta) and
its maintenance's, which the fold worker's session has too (subscriber.maintenance.fold_worker)."""

# Session settings DeltaStore sets on its session. The purge replaces bookkeeping rows with
# ``replaceWhere``, writing a row that its predicate need not select, so Delta's check that
# every written row matches it must be off. The row count of the replaced data is a metric
# nobody reads, and costs another pass.
STORE_SESSION_CONF = {
    "spark.databricks.delta.replaceWhere.constraintCheck.enabled": "false",
    "spark.databricks.delta.replaceWhere.dataColumns.metrics.enabled": "false",
    # Delta copies the list of every active file into each commit's checksum file while the
    # table has few files, which is what a compacted store has: 20-40 KB of log per commit
    # instead of 2 KB.
    "spark.databricks.delta.allFilesInCrc.enabled": "false",
    # Each file's least and greatest path, which the fold picks its files by
    # (subscriber.store.scope_ranges): Delta's default keeps 32 characters, and a site's paths
    # share longer prefixes ("/content/site/en/products-and-s"), so every file's range held
    # every path. Paths longer than this keep a range that is wider than the file's, not wrong.
    "spark.databricks.io.skipping.stringPrefixLength": "256",
}

# Settings of the session the maintenance steps run in (``maintenance_spark``), beside the
# imports on the same driver: each of its stages runs as one task, so it holds one core at
# most and an import's task takes the other (with the scheduler pools, subscriber/spark.py). In
# parallel tasks, a fold on a million-node store took both cores of a 2-core machine and the
# imports beside it waited for them.
MAINTENANCE_SESSION_CONF = {
    "spark.sql.shuffle.partitions": "1",
    "spark.databricks.delta.snapshotPartitions": "1",
    "spark.sql.leafNodeDefaultParallelism": "1",
    "spark.sql.files.maxPartitionBytes": str(1 << 40),
}
