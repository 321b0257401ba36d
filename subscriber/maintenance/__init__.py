"""The upkeep of the subscriber's content store in idle time, never in an import's way: folds,
compaction, checkpoints, retention and VACUUM, computed in a low-priority worker process where
it can be. Used by the Delta store and the import loop; imported from its modules (importing
the package starts no Spark)."""
