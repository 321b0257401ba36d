"""The upkeep of the subscriber's content store: folds, compaction, checkpoints, retention and
VACUUM, and what schedules them (``scheduler``)."""
