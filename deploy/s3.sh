#!/usr/bin/env bash
# S3-compatible server for development and CI: versitygw (Apache-2.0) with its posix backend,
# built from the Go module proxy at a pinned version.
#
#   deploy/s3.sh install|start|stop|restart|status|logs [-f]|wipe
#
# wipe deletes all buckets of a stopped server.
#
# Everything lives under $SCD_HOME (default ~/.scd):
#   bin/versitygw            the server binary
#   <name>/data/             buckets (one directory each) and objects
#   <name>/sidecar/          object metadata, only where the filesystem lacks user xattrs
#   logs/<name>.log          server output        run/<name>.pid   pid of the running server
#
# Environment:
#   SCD_S3_PORT                        listen port on 127.0.0.1, default 19000
#   SCD_S3_ACCESS_KEY / SCD_S3_SECRET_KEY   root credentials, default scdadmin / scdadmin-secret
#   SCD_S3_REGION                      region, default us-east-1
#   SCD_S3_NAME                        instance name, default "s3"
#   SCD_S3_DATA                        data directory, default $SCD_HOME/<name>/data
set -euo pipefail
# shellcheck source=deploy/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

VERSITYGW_MODULE="github.com/versity/versitygw/cmd/versitygw"
VERSITYGW_VERSION="v1.7.0"
VERSITYGW_BIN="$SCD_HOME/bin/versitygw"
# versitygw v1.7.0 declares `go 1.25.0` in its go.mod.
GO_MIN_MINOR=25

S3_NAME="${SCD_S3_NAME:-s3}"
S3_INSTANCE_DIR="$SCD_HOME/$S3_NAME"
S3_DATA_DIR="${SCD_S3_DATA:-$S3_INSTANCE_DIR/data}"
S3_SIDECAR_DIR="$S3_INSTANCE_DIR/sidecar"
# Remembers how object metadata is stored for this data directory ("xattr" or "sidecar"):
# switching later would lose the metadata of existing objects.
S3_META_MODE_FILE="$S3_INSTANCE_DIR/metadata-mode"
S3_PIDFILE="$SCD_HOME/run/$S3_NAME.pid"
S3_LOG="$SCD_HOME/logs/$S3_NAME.log"
S3_PROC_PATTERN="$VERSITYGW_BIN"
# versitygw is ready well under a second; 30 s covers a heavily loaded CI runner.
S3_START_TIMEOUT_S=30
# It stops immediately on SIGTERM; 15 s before SIGKILL only guards against a hang.
S3_STOP_TIMEOUT_S=15

cmd_install() {
    local marker="$SCD_HOME/bin/.versitygw.version" started go_cmd
    if [[ -x "$VERSITYGW_BIN" && -f "$marker" && "$(<"$marker")" == "$VERSITYGW_VERSION" ]]; then
        return 0
    fi
    go_cmd="$(scd_find_go "$GO_MIN_MINOR")"
    started="$(scd_now)"
    scd_log "building versitygw $VERSITYGW_VERSION into $SCD_HOME/bin with $go_cmd" \
        "(the first build takes minutes)"
    mkdir -p "$SCD_HOME/bin" "$SCD_HOME/logs"
    if ! GOBIN="$SCD_HOME/bin" GOTOOLCHAIN=local "$go_cmd" install "$VERSITYGW_MODULE@$VERSITYGW_VERSION" \
        >"$SCD_HOME/logs/versitygw-install.log" 2>&1; then
        scd_tail_log "$SCD_HOME/logs/versitygw-install.log"
        scd_die "building versitygw failed"
    fi
    echo "$VERSITYGW_VERSION" >"$marker"
    scd_log "installed versitygw $VERSITYGW_VERSION in $(scd_elapsed "$started")s"
}

s3_running() { scd_pid_alive "$S3_PIDFILE" "$S3_PROC_PATTERN"; }

# probe: one authenticated S3 call (ListBuckets); true on a valid answer.
# Without -q, grep reads to the end: the client never dies of SIGPIPE (pipefail).
probe() { scd_s3 GET / --fail 2>/dev/null | grep -F '<ListAllMyBucketsResult' >/dev/null; }

# launch MODE: starts the server with object metadata in xattrs or a sidecar directory and
# waits until it answers (scd_wait_ready's status: 2 when it exited).
launch() {
    local mode="$1"
    local -a meta_args=()
    if [[ "$mode" == sidecar ]]; then
        mkdir -p "$S3_SIDECAR_DIR"
        meta_args=(--sidecar "$S3_SIDECAR_DIR")
    fi
    # Credentials go through the environment (ROOT_ACCESS_KEY / ROOT_SECRET_KEY) so they do not
    # show in the process list.
    ROOT_ACCESS_KEY="$S3_ACCESS_KEY" ROOT_SECRET_KEY="$S3_SECRET_KEY" scd_launch "$S3_PIDFILE" \
        "$S3_LOG" "versitygw $S3_NAME on $S3_ENDPOINT (metadata: $mode)" \
        "$VERSITYGW_BIN" --port "127.0.0.1:$S3_PORT" --region "$S3_REGION" --quiet \
        posix "${meta_args[@]}" "$S3_DATA_DIR"
    scd_wait_ready "S3 server '$S3_NAME'" "$(<"$S3_PIDFILE")" "$S3_START_TIMEOUT_S" "$S3_LOG" probe
}

cmd_start() {
    local started mode rc
    started="$(scd_now)"
    cmd_install
    command -v curl >/dev/null || scd_die "curl not found (used to check the server answers)"
    mkdir -p "$S3_INSTANCE_DIR" "$S3_DATA_DIR" "$SCD_HOME/run" "$SCD_HOME/logs"
    if s3_running; then
        if probe; then
            scd_log "S3 server '$S3_NAME' already running (pid $(<"$S3_PIDFILE")) on $S3_ENDPOINT"
            return 0
        fi
        scd_log "S3 server '$S3_NAME' runs but does not accept these credentials; restarting it"
        cmd_stop
    fi
    rm -f "$S3_PIDFILE"
    scd_require_free_ports "set SCD_S3_PORT, or stop that process" "$S3_PORT"
    mode="$(cat "$S3_META_MODE_FILE" 2>/dev/null || echo xattr)"
    rc=0
    launch "$mode" || rc=$?
    if ((rc == 2)) && [[ "$mode" == xattr ]] && grep -q 'xattr check failed' "$S3_LOG"; then
        scd_log "no user xattrs on $S3_DATA_DIR; storing object metadata in $S3_SIDECAR_DIR"
        mode=sidecar
        rc=0
        launch "$mode" || rc=$?
    fi
    if ((rc != 0)); then
        cmd_stop
        scd_die "S3 server '$S3_NAME' failed to start"
    fi
    echo "$mode" >"$S3_META_MODE_FILE"
    scd_log "S3 server '$S3_NAME' ready on $S3_ENDPOINT (pid $(<"$S3_PIDFILE"))" \
        "in $(scd_elapsed "$started")s"
}

cmd_wipe() {
    s3_running && scd_die "S3 server '$S3_NAME' is running; stop it before wiping its data"
    rm -rf "$S3_DATA_DIR" "$S3_SIDECAR_DIR" "$S3_META_MODE_FILE"
    scd_log "removed the buckets of S3 server '$S3_NAME' ($S3_DATA_DIR)"
}

cmd_stop() {
    scd_stop "S3 server '$S3_NAME'" "$S3_PIDFILE" "$S3_PROC_PATTERN" "$S3_STOP_TIMEOUT_S"
}

cmd_status() {
    if s3_running; then
        echo "S3 server '$S3_NAME' running: pid $(<"$S3_PIDFILE"), endpoint $S3_ENDPOINT," \
            "data $S3_DATA_DIR, log $S3_LOG"
        return 0
    fi
    echo "S3 server '$S3_NAME' not running (endpoint would be $S3_ENDPOINT)"
    return 3
}

scd_service_main "$S3_NAME" "$S3_LOG" "$@"
