#!/usr/bin/env bash
# The local infrastructure of scd in one command: Kafka (deploy/kafka.sh), the S3 server
# (deploy/s3.sh) and the Spark jars the tests' SparkSession loads: Delta Lake and s3a
# (deploy/spark-jars.sh --s3a).
#
#   deploy/services.sh up       install what is missing, start both servers, wait until ready
#   deploy/services.sh down     stop both servers (data is kept)
#   deploy/services.sh reset    stop both servers and delete their data (topics, buckets)
#   deploy/services.sh status   exit 0 only when both run
#   deploy/services.sh env      print the exports the tests read: eval "$(deploy/services.sh env)"
#
# Ports, credentials and locations follow the variables documented in kafka.sh and s3.sh.
set -euo pipefail
# shellcheck source=deploy/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

cmd_up() {
    local started pids=() pid failed=0
    started="$(scd_now)"
    # The Go build of the S3 server and the jar downloads are independent of the Kafka install:
    # run them alongside it (each is a no-op once done).
    "$SCD_DEPLOY_DIR/s3.sh" install & pids+=($!)
    "$SCD_DEPLOY_DIR/spark-jars.sh" --s3a >/dev/null & pids+=($!)
    "$SCD_DEPLOY_DIR/kafka.sh" start || failed=1
    for pid in "${pids[@]}"; do
        wait "$pid" || failed=1
    done
    ((failed == 0)) || scd_die "bringing the services up failed (see the messages above)"
    "$SCD_DEPLOY_DIR/s3.sh" start
    scd_log "services up in $(scd_elapsed "$started")s; Spark jars listed in" \
        "$SCD_HOME/jars/delta.txt and $SCD_HOME/jars/s3a.txt"
}

# each_server COMMAND: runs deploy/s3.sh COMMAND and deploy/kafka.sh COMMAND, the second even
# when the first fails; fails when either did.
each_server() {
    local rc=0
    "$SCD_DEPLOY_DIR/s3.sh" "$1" || rc=$?
    "$SCD_DEPLOY_DIR/kafka.sh" "$1" || rc=$?
    return "$rc"
}

cmd_down() { each_server stop || return 1; }

cmd_reset() {
    cmd_down
    each_server wipe
}

cmd_status() { each_server status || return 3; }

cmd_env() {
    printf 'export SCD_TEST_KAFKA_BOOTSTRAP=%q\n' "$KAFKA_BOOTSTRAP"
    printf 'export SCD_TEST_S3_ENDPOINT=%q\n' "$S3_ENDPOINT"
    printf 'export SCD_TEST_S3_ACCESS_KEY=%q\n' "$S3_ACCESS_KEY"
    printf 'export SCD_TEST_S3_SECRET_KEY=%q\n' "$S3_SECRET_KEY"
    printf 'export SCD_TEST_S3_REGION=%q\n' "$S3_REGION"
}

case "${1:-}" in
    up) cmd_up ;;
    down) cmd_down ;;
    reset) cmd_reset ;;
    status) cmd_status ;;
    env) cmd_env ;;
    *) echo "usage: $0 up|down|reset|status|env" >&2; exit 2 ;;
esac
