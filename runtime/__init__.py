"""What every scd package shares at run time: the root error, the settings base, logging and
redaction, the small HTTP server, thread supervision and progress output (and the one
percentile of the benches and tests). It imports no other scd package."""
