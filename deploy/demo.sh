#!/usr/bin/env bash
# The embedded demo of scd, on a fresh machine:  bash deploy/demo.sh [scd demo arguments]
#
# Creates .venv and installs scd when needed (as deploy/test.sh does), fetches the Delta Lake
# jars into the cache (deploy/spark-jars.sh), then runs `scd demo`: a publisher and two
# subscribers in one process on the SQLite journal, a local blob store and local Spark. It
# prints a one-screen story (the console's address, each distribute, the queues draining, the
# verification) and exits 0 only if every subscriber's exported content equals the
# distributed sample site. Logs go to a file it names (-v: to standard error);
# --keep-running keeps everything up for a look at the console until Ctrl-C.
set -euo pipefail
# shellcheck source=deploy/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$SCD_REPO_DIR"

scd_ensure_venv
jars="$(paste -sd, "$(bash "$SCD_DEPLOY_DIR/spark-jars.sh")")"
SCD_SUBSCRIBER_SPARK_JARS="$jars" exec "$VENV/bin/scd" demo "$@"
