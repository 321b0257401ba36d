"""The subscriber agents one daemon runs: one, or several from an agents file
(``SCD_SUBSCRIBER_AGENTS_FILE``), on one Spark driver, with one /health, /ready and /metrics for
all of them, and a bound on how many open or commit their stores at once (starting agents
first). Used by subscriber.daemon; imported from its modules."""
