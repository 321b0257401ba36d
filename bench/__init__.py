"""scd's benchmarks, each run as ``.venv/bin/python -m bench.<stem> [args]`` from the
repository root (bench/README.md); they share code by importing each other."""
