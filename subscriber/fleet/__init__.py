"""The subscriber agents one daemon runs: one, or several from an agents file, on one Spark
driver (subscriber.daemon). ``agents_file`` reads and checks that file; ``view`` answers
/health, /ready and /metrics for all of them; ``commit_slots`` lets a few of them open or
commit their stores at once, starting agents first."""
