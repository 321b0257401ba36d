#!/usr/bin/env bash
# The scd local cluster without Docker: the topology of deploy/docker-compose.yml as plain
# processes on this machine. Kafka and the S3 server (deploy/services.sh), one publisher
# (scd publisher) and N subscribers (scd subscriber), each subscriber with its own
# content store and health port, Spark local per subscriber or a standalone Spark master and
# worker started from the pyspark install.
#
#   deploy/cluster.sh up [--s3a] [--spark-standalone] [NAME...]
#                                  start what is not running, wait until every process answers,
#                                  print the table
#   deploy/cluster.sh status       the table; exit 0 only when all run
#   deploy/cluster.sh down [NAME...]   stop what up started (data is kept)
#   deploy/cluster.sh logs [NAME] [-f]  a process's log (all logs' ends if no NAME)
#
#   --s3a               content stores on the S3 server (s3a://) instead of local directories
#   --spark-standalone  a Spark master and one worker (one core and one executor per
#                       subscriber) instead of local Spark inside each subscriber
#   NAME...             only these processes (publisher, subscriber-N, spark-master,
#                       spark-worker); down then leaves Kafka and the S3 server alone
#
# Processes are named publisher, subscriber-1..N, spark-master and spark-worker. Each has a pid
# file ($SCD_CLUSTER_DIR/run/NAME.pid), a log ($SCD_CLUSTER_LOG_DIR/NAME.log) and, once it
# exited by itself, its exit status in run/NAME.exit (128 + N: killed by signal N), shown by
# status.
#
# Environment:
#   SCD_CLUSTER_SUBSCRIBERS          number of subscribers, default 3
#   SCD_CLUSTER_DIR                  state: pid files, API token, local stores, Spark work
#                                    directories; default $SCD_HOME/cluster
#   SCD_CLUSTER_LOG_DIR              process logs, default $SCD_HOME/logs/cluster
#   SCD_CLUSTER_PUBLISHER_PORT       publisher REST API on 127.0.0.1, default 18080
#   SCD_CLUSTER_SUBSCRIBER_PORT      health port of subscriber-1, default 18090 (subscriber-i
#                                    gets this + i - 1)
#   SCD_CLUSTER_SPARK_PORT / SCD_CLUSTER_SPARK_UI_PORT
#                                    standalone master port and its web UI's, default 17077
#                                    and 18180 (the worker's UI is on the port after it)
#   SCD_CLUSTER_CONTENT_BUCKET       bucket of the s3a:// stores (--s3a), default scd-content
#   SCD_CLUSTER_START_TIMEOUT_S      how long up waits for each subscriber's health endpoint,
#                                    default 600 (seconds)
#   SCD_CLUSTER_KAFKA_BOOTSTRAP / SCD_CLUSTER_S3_ENDPOINT
#                                    use this running Kafka (host:port) and this running S3
#                                    server (http://host:port) instead of starting
#                                    deploy/services.sh; credentials and region
#                                    from SCD_S3_ACCESS_KEY / SCD_S3_SECRET_KEY / SCD_S3_REGION
#                                    (the deploy/s3.sh variables and defaults)
# Settings of the daemons themselves (SCD_PUBLISHER_*, SCD_SUBSCRIBER_*, SCD_JOURNAL_*,
# SCD_BLOB_*) pass through from the environment: this script only fills in those left unset,
# except the per-subscriber agent name, store path and health port, which it assigns.
# SCD_CLUSTER_SUBSCRIBER_<N>_<SETTING> sets SCD_SUBSCRIBER_<SETTING> for subscriber-N alone
# (say, SCD_CLUSTER_SUBSCRIBER_2_EDITABLE=true).
# Without SCD_PUBLISHER_API_TOKEN (and without SCD_PUBLISHER_DEV_MODE=true) a random token is
# generated once and kept in $SCD_CLUSTER_DIR/token.
set -euo pipefail
# shellcheck source=deploy/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

PYTHON="$VENV/bin/python"
# The daemons run as the installed command line, the one entry point of each.
SCD="$VENV/bin/scd"
SUBSCRIBERS="${SCD_CLUSTER_SUBSCRIBERS:-3}"
CLUSTER_DIR="${SCD_CLUSTER_DIR:-$SCD_HOME/cluster}"
LOG_DIR="${SCD_CLUSTER_LOG_DIR:-$SCD_HOME/logs/cluster}"
RUN_DIR="$CLUSTER_DIR/run"
CONF_FILE="$CLUSTER_DIR/cluster.conf"
TOKEN_FILE="$CLUSTER_DIR/token"
PUBLISHER_PORT="${SCD_CLUSTER_PUBLISHER_PORT:-18080}"
SUBSCRIBER_BASE_PORT="${SCD_CLUSTER_SUBSCRIBER_PORT:-18090}"
SPARK_PORT="${SCD_CLUSTER_SPARK_PORT:-17077}"
SPARK_UI_PORT="${SCD_CLUSTER_SPARK_UI_PORT:-18180}"
SPARK_WORKER_UI_PORT=$((SPARK_UI_PORT + 1))
CONTENT_BUCKET="${SCD_CLUSTER_CONTENT_BUCKET:-scd-content}"

# The publisher is ready within seconds (topics exist, the journal answers); 60 s covers a
# loaded machine and the first topic creation.
PUBLISHER_START_TIMEOUT_S=60
# A subscriber answers once its Spark driver runs and its store is open: 20-40 s each on a
# 2-core machine when three JVMs start at once, longer on a standalone master (executors
# start first).
# On a saturated 2-core machine the first s3a store creation alone was seen to take 3+ min,
# so the default leaves twice that.
SUBSCRIBER_START_TIMEOUT_S="${SCD_CLUSTER_START_TIMEOUT_S:-600}"
# The standalone master and worker are up within seconds; 60 s leaves room for a busy machine.
SPARK_START_TIMEOUT_S=60
# SIGTERM grace periods before SIGKILL: a subscriber finishes the import in progress (its
# agent waits up to 60 s) and stops Spark; the publisher lets requests answer for up to 35 s
# (publisher/daemon.py); the Spark daemons stop at once.
SUBSCRIBER_STOP_TIMEOUT_S=90
PUBLISHER_STOP_TIMEOUT_S=45
SPARK_STOP_TIMEOUT_S=15
# Executors of the standalone worker: Spark's default of 1 GiB per subscriber application.
SPARK_EXECUTOR_MEMORY_GB=1
# What identifies each kind of process in /proc/<pid>/cmdline.
PUBLISHER_PATTERN="bin/scd publisher"
SUBSCRIBER_PATTERN="bin/scd subscriber"
SPARK_MASTER_PATTERN="org.apache.spark.deploy.master.Master"
SPARK_WORKER_PATTERN="org.apache.spark.deploy.worker.Worker"

# ---------------------------------------------------------------- helpers

usage() {
    echo "usage: $0 up [--s3a] [--spark-standalone] [NAME...] | status | down [NAME...]" \
        "| logs [NAME] [-f]" >&2
    exit 2
}

pidfile() { echo "$RUN_DIR/$1.pid"; }
logfile() { echo "$LOG_DIR/$1.log"; }

pattern_of() {
    case "$1" in
        publisher) echo "$PUBLISHER_PATTERN" ;;
        subscriber-*) echo "$SUBSCRIBER_PATTERN" ;;
        spark-master) echo "$SPARK_MASTER_PATTERN" ;;
        spark-worker) echo "$SPARK_WORKER_PATTERN" ;;
        *) scd_die "unknown process name '$1'" ;;
    esac
}

running() { scd_pid_alive "$(pidfile "$1")" "$(pattern_of "$1")"; }

subscriber_port() { echo $((SUBSCRIBER_BASE_PORT + $1 - 1)); }

# The processes of the recorded cluster, in start order.
names() {
    local i
    if [[ "${CONF_SPARK_STANDALONE:-0}" == 1 ]]; then
        echo spark-master spark-worker
    fi
    echo publisher
    for ((i = 1; i <= ${CONF_SUBSCRIBERS:-0}; i++)); do
        echo "subscriber-$i"
    done
}

any_running() {
    local name
    for name in $(names); do
        running "$name" && return 0
    done
    return 1
}

# load_conf: reads what the last up recorded (defaults: this environment's values).
load_conf() {
    CONF_SUBSCRIBERS=0 CONF_S3A=0 CONF_SPARK_STANDALONE=0 CONF_STARTED_KAFKA=0 CONF_STARTED_S3=0
    CONF_PUBLISHER_PORT="$PUBLISHER_PORT" CONF_SUBSCRIBER_PORT="$SUBSCRIBER_BASE_PORT"
    CONF_SPARK_PORT="$SPARK_PORT" CONF_SPARK_UI_PORT="$SPARK_UI_PORT" CONF_LOG_DIR="$LOG_DIR"
    # shellcheck source=/dev/null
    [[ -f "$CONF_FILE" ]] && source "$CONF_FILE"
    return 0
}

# use_conf: status, down and logs address the processes where up started them.
use_conf() {
    load_conf
    PUBLISHER_PORT="$CONF_PUBLISHER_PORT" SUBSCRIBER_BASE_PORT="$CONF_SUBSCRIBER_PORT"
    SPARK_PORT="$CONF_SPARK_PORT" SPARK_UI_PORT="$CONF_SPARK_UI_PORT" LOG_DIR="$CONF_LOG_DIR"
    SPARK_WORKER_UI_PORT=$((SPARK_UI_PORT + 1))
}

write_conf() {
    mkdir -p "$CLUSTER_DIR"
    cat >"$CONF_FILE" <<EOF
# Written by deploy/cluster.sh up: what runs and where, for status, down and logs.
CONF_SUBSCRIBERS=$CONF_SUBSCRIBERS
CONF_S3A=$CONF_S3A
CONF_SPARK_STANDALONE=$CONF_SPARK_STANDALONE
CONF_STARTED_KAFKA=$CONF_STARTED_KAFKA
CONF_STARTED_S3=$CONF_STARTED_S3
CONF_PUBLISHER_PORT=$CONF_PUBLISHER_PORT
CONF_SUBSCRIBER_PORT=$CONF_SUBSCRIBER_PORT
CONF_SPARK_PORT=$CONF_SPARK_PORT
CONF_SPARK_UI_PORT=$CONF_SPARK_UI_PORT
CONF_LOG_DIR=$(printf '%q' "$CONF_LOG_DIR")
EOF
}

# http_ok URL [TEXT]: true when URL answers 2xx (with TEXT in its body, if given).
http_ok() {
    local body
    body="$(curl -sf --max-time "$SCD_PROBE_REQUEST_TIMEOUT_S" "$1" 2>/dev/null)" \
        && [[ "$body" == *"${2:-}"* ]]
}

# wait_http NAME URL TIMEOUT_S [TEXT]: waits until URL answers 2xx (with TEXT in its body, if
# given); fails early when the process exits.
wait_http() {
    local name="$1" url="$2" timeout_s="$3"
    shift 3
    scd_wait_ready "$name" "$(<"$(pidfile "$name")")" "$timeout_s" "$(logfile "$name")" \
        http_ok "$url" "$@"
}

# launch NAME PORT COMMAND...: starts COMMAND as process NAME, with the variables exported by
# the caller.
launch() {
    local name="$1" port="$2"
    shift 2
    scd_require_free_ports "for $name" "$port"
    scd_launch "$(pidfile "$name")" "$(logfile "$name")" "$name" "$@"
}

# stop NAME TIMEOUT_S
stop() { scd_stop "$1" "$(pidfile "$1")" "$(pattern_of "$1")" "$2"; }

# make_bucket NAME: creates an S3 bucket (an existing one is fine).
make_bucket() {
    local code
    code="$(scd_s3 PUT "/$1" -o /dev/null -w '%{http_code}')" || code=000
    # 200: created; 409: BucketAlreadyOwnedByYou (or taken, which the daemons will report).
    [[ "$code" == 200 || "$code" == 409 ]] || scd_die "creating bucket $1 on $S3_ENDPOINT: HTTP $code"
}

api_token() {
    if [[ -n "${SCD_PUBLISHER_API_TOKEN:-}" ]]; then
        echo "$SCD_PUBLISHER_API_TOKEN"
        return
    fi
    if [[ ! -s "$TOKEN_FILE" ]]; then
        mkdir -p "$CLUSTER_DIR"
        # 24 random bytes as 48 hex digits: above the publisher's 16-character minimum.
        (umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$TOKEN_FILE")
        scd_log "generated the publisher's API token in $TOKEN_FILE"
    fi
    cat "$TOKEN_FILE"
}

# class_archive: the subscribers' Spark class-data archive ($SCD_HOME/spark, named after the
# JDK and Spark install it is valid for), built on first use (about 90 s, once per install):
# each subscriber's JVM then starts faster.
class_archive() {
    local name archive
    name="$(SCD_SUBSCRIBER_SPARK_JARS="$1" "$PYTHON" -c '
from subscriber.settings import SubscriberSettings
from subscriber.spark_archive import archive_name
print(archive_name(SubscriberSettings()))')"
    archive="$SCD_HOME/spark/$name"
    if [[ ! -f "$archive" ]]; then
        scd_log "building the Spark class archive $archive (once)"
        SCD_SUBSCRIBER_SPARK_JARS="$1" "$SCD" spark-archive "$archive" >&2
    fi
    echo "$archive"
}

# spark_jars: the comma-separated jars of the subscribers' Spark sessions.
spark_jars() {
    local lists list jars=()
    if [[ -n "${SCD_SUBSCRIBER_SPARK_JARS:-}" ]]; then
        echo "$SCD_SUBSCRIBER_SPARK_JARS"
        return
    fi
    if [[ "$CONF_S3A" == 1 ]]; then
        lists="$("$SCD_DEPLOY_DIR/spark-jars.sh" --s3a)"
    else
        lists="$("$SCD_DEPLOY_DIR/spark-jars.sh")"
    fi
    for list in $lists; do
        mapfile -t -O "${#jars[@]}" jars <"$list"
    done
    local IFS=,
    echo "${jars[*]}"
}

# ---------------------------------------------------------------- up

# Locates or starts Kafka and the S3 server; sets KAFKA_BOOTSTRAP and S3_ENDPOINT.
start_services() {
    if [[ -n "${SCD_CLUSTER_KAFKA_BOOTSTRAP:-}" || -n "${SCD_CLUSTER_S3_ENDPOINT:-}" ]]; then
        [[ -n "${SCD_CLUSTER_KAFKA_BOOTSTRAP:-}" && -n "${SCD_CLUSTER_S3_ENDPOINT:-}" ]] \
            || scd_die "set both SCD_CLUSTER_KAFKA_BOOTSTRAP and SCD_CLUSTER_S3_ENDPOINT, or neither"
        KAFKA_BOOTSTRAP="$SCD_CLUSTER_KAFKA_BOOTSTRAP"
        S3_ENDPOINT="$SCD_CLUSTER_S3_ENDPOINT"
        scd_log "using the running Kafka at $KAFKA_BOOTSTRAP and S3 server at $S3_ENDPOINT"
        return
    fi
    # Remember which servers this cluster started: down stops those and leaves the others.
    if ! "$SCD_DEPLOY_DIR/kafka.sh" status >/dev/null; then CONF_STARTED_KAFKA=1; fi
    if ! "$SCD_DEPLOY_DIR/s3.sh" status >/dev/null; then CONF_STARTED_S3=1; fi
    write_conf
    "$SCD_DEPLOY_DIR/services.sh" up
}

start_spark() {
    if ! running spark-master; then
        mkdir -p "$CLUSTER_DIR/spark"
        # One core per application: the first subscriber would otherwise take every core of
        # the worker and the others would wait forever.
        SPARK_MASTER_OPTS="-Dspark.deploy.defaultCores=1" \
            launch spark-master "$SPARK_PORT" "$VENV/bin/spark-class" \
            org.apache.spark.deploy.master.Master --host 127.0.0.1 --port "$SPARK_PORT" \
            --webui-port "$SPARK_UI_PORT"
    fi
    wait_http spark-master "http://127.0.0.1:$SPARK_UI_PORT/json/" "$SPARK_START_TIMEOUT_S" ALIVE \
        || scd_die "the Spark master failed to start"
    if ! running spark-worker; then
        mkdir -p "$CLUSTER_DIR/spark/work"
        SPARK_WORKER_OPTS="-Dspark.worker.cleanup.enabled=true" \
            launch spark-worker "$SPARK_WORKER_UI_PORT" "$VENV/bin/spark-class" \
            org.apache.spark.deploy.worker.Worker --host 127.0.0.1 \
            --cores "$CONF_SUBSCRIBERS" --memory "$((CONF_SUBSCRIBERS * SPARK_EXECUTOR_MEMORY_GB))g" \
            --work-dir "$CLUSTER_DIR/spark/work" --webui-port "$SPARK_WORKER_UI_PORT" \
            "spark://127.0.0.1:$SPARK_PORT"
    fi
    # Registered: the master counts one alive worker.
    wait_http spark-worker "http://127.0.0.1:$SPARK_UI_PORT/json/" "$SPARK_START_TIMEOUT_S" \
        '"aliveworkers" : 1' || scd_die "the Spark worker did not register with the master"
}

# selected NAME: true when the command names NAME, or names no process at all.
selected() {
    local chosen
    ((${#SELECTED[@]} == 0)) && return 0
    for chosen in "${SELECTED[@]}"; do
        [[ "$chosen" == "$1" ]] && return 0
    done
    return 1
}

# select_names NAME...: the processes a command is restricted to (SELECTED), each a process of
# the recorded cluster.
select_names() {
    local name
    SELECTED=("$@")
    for name in "$@"; do
        grep -qxF -- "$name" <<<"$(names)" || scd_die "no process '$name' in this cluster" \
            "(processes: $(names | paste -sd' '))"
    done
}

# launch_subscriber I STORE: starts subscriber-I with its own settings
# (SCD_CLUSTER_SUBSCRIBER_<I>_<SETTING>) on top of the shared ones.
launch_subscriber() {
    local i="$1" store="$2" name="subscriber-$1" prefix="SCD_CLUSTER_SUBSCRIBER_$1_" variable
    (
        for variable in $(compgen -v "$prefix"); do
            export "SCD_SUBSCRIBER_${variable#"$prefix"}=${!variable}"
        done
        SCD_SUBSCRIBER_AGENT_NAME="$name" SCD_SUBSCRIBER_STORE_PATH="$store" \
            SCD_SUBSCRIBER_HTTP_PORT="$(subscriber_port "$i")" \
            launch "$name" "$(subscriber_port "$i")" "$SCD" subscriber
    )
}

cmd_up() {
    local s3a=0 standalone=0 started arg i name token_source jars chosen=()
    for arg in "$@"; do
        case "$arg" in
            --s3a) s3a=1 ;;
            --spark-standalone) standalone=1 ;;
            -*) usage ;;
            *) chosen+=("$arg") ;;
        esac
    done
    [[ "$SUBSCRIBERS" =~ ^[1-9][0-9]*$ ]] || scd_die "SCD_CLUSTER_SUBSCRIBERS must be a positive number"
    [[ -x "$PYTHON" && -x "$SCD" ]] \
        || scd_die "$SCD not found: create the venv first (bash deploy/test.sh does)"
    command -v curl >/dev/null || scd_die "curl not found (used to check the processes answer)"
    started="$(scd_now)"
    load_conf
    local wanted="$SUBSCRIBERS $s3a $standalone $PUBLISHER_PORT $SUBSCRIBER_BASE_PORT"
    wanted+=" $SPARK_PORT $SPARK_UI_PORT $LOG_DIR"
    local recorded="$CONF_SUBSCRIBERS $CONF_S3A $CONF_SPARK_STANDALONE $CONF_PUBLISHER_PORT"
    recorded+=" $CONF_SUBSCRIBER_PORT $CONF_SPARK_PORT $CONF_SPARK_UI_PORT $CONF_LOG_DIR"
    if any_running; then
        [[ "$wanted" == "$recorded" ]] || scd_die "the cluster in $CLUSTER_DIR runs with" \
            "another configuration (see $CONF_FILE); run '$0 down' first"
    else
        CONF_STARTED_KAFKA=0 CONF_STARTED_S3=0
    fi
    CONF_SUBSCRIBERS="$SUBSCRIBERS" CONF_S3A="$s3a" CONF_SPARK_STANDALONE="$standalone"
    CONF_PUBLISHER_PORT="$PUBLISHER_PORT" CONF_SUBSCRIBER_PORT="$SUBSCRIBER_BASE_PORT"
    CONF_SPARK_PORT="$SPARK_PORT" CONF_SPARK_UI_PORT="$SPARK_UI_PORT" CONF_LOG_DIR="$LOG_DIR"
    select_names "${chosen[@]}"
    write_conf
    start_services
    mkdir -p "$RUN_DIR" "$LOG_DIR"

    # What every daemon reads: the journal on Kafka, the blob store on the S3 server.
    export SCD_JOURNAL_BACKEND="${SCD_JOURNAL_BACKEND:-kafka}"
    export SCD_JOURNAL_BOOTSTRAP_SERVERS="${SCD_JOURNAL_BOOTSTRAP_SERVERS:-$KAFKA_BOOTSTRAP}"
    export SCD_BLOB_BACKEND="${SCD_BLOB_BACKEND:-s3}"
    export SCD_BLOB_ENDPOINT_URL="${SCD_BLOB_ENDPOINT_URL:-$S3_ENDPOINT}"
    export SCD_BLOB_BUCKET="${SCD_BLOB_BUCKET:-scd-blobs}"
    export SCD_BLOB_REGION="${SCD_BLOB_REGION:-$S3_REGION}"
    export SCD_BLOB_ACCESS_KEY="${SCD_BLOB_ACCESS_KEY:-$S3_ACCESS_KEY}"
    export SCD_BLOB_SECRET_KEY="${SCD_BLOB_SECRET_KEY:-$S3_SECRET_KEY}"
    # Spark binds and advertises the loopback address: everything runs on this machine, and
    # a hostname that resolves elsewhere (or nowhere) cannot break the drivers.
    export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"
    export SPARK_LOCAL_HOSTNAME="${SPARK_LOCAL_HOSTNAME:-127.0.0.1}"
    # The interpreter Spark starts for Python code (on executors too): the venv's, with scd.
    export PYSPARK_PYTHON="${PYSPARK_PYTHON:-$PYTHON}"
    if [[ "$SCD_BLOB_BACKEND" == s3 ]]; then
        make_bucket "$SCD_BLOB_BUCKET"
    fi
    if [[ "$s3a" == 1 ]]; then
        make_bucket "$CONTENT_BUCKET"
    fi
    if [[ "$standalone" == 1 ]]; then
        start_spark
    fi

    # A generated API token reaches the publisher only (through its environment, not its
    # command line, which every user can read).
    local token=""
    if [[ -n "${SCD_PUBLISHER_API_TOKEN:-}" ]]; then
        token_source="SCD_PUBLISHER_API_TOKEN"
    elif [[ "${SCD_PUBLISHER_DEV_MODE:-false}" == true ]]; then
        token_source="none (SCD_PUBLISHER_DEV_MODE=true)"
    else
        token="$(api_token)"
        token_source="$TOKEN_FILE"
    fi
    if ! selected publisher || running publisher; then
        :
    elif [[ -n "$token" ]]; then
        SCD_PUBLISHER_API_TOKEN="$token" SCD_PUBLISHER_HOST=127.0.0.1 \
            SCD_PUBLISHER_PORT="$PUBLISHER_PORT" launch publisher "$PUBLISHER_PORT" "$SCD" publisher
    else
        SCD_PUBLISHER_HOST=127.0.0.1 SCD_PUBLISHER_PORT="$PUBLISHER_PORT" \
            launch publisher "$PUBLISHER_PORT" "$SCD" publisher
    fi
    if selected publisher; then
        wait_http publisher "http://127.0.0.1:$PUBLISHER_PORT/ready" "$PUBLISHER_START_TIMEOUT_S" \
            || scd_die "the publisher failed to start (log: $(logfile publisher))"
    fi

    jars="$(spark_jars)"
    export SCD_SUBSCRIBER_SPARK_JARS="$jars"
    if [[ -z "${SCD_SUBSCRIBER_SPARK_CLASS_ARCHIVE+set}" ]]; then
        SCD_SUBSCRIBER_SPARK_CLASS_ARCHIVE="$(class_archive "$jars")"
        export SCD_SUBSCRIBER_SPARK_CLASS_ARCHIVE
    fi
    export SCD_SUBSCRIBER_PUB_AGENTS="${SCD_SUBSCRIBER_PUB_AGENTS:-${SCD_PUBLISHER_AGENT_NAME:-publish}}"
    if [[ "$standalone" == 1 ]]; then
        export SCD_SUBSCRIBER_SPARK_MASTER="spark://127.0.0.1:$SPARK_PORT"
        # The worker runs on this host: its executors read the drivers' jars where they are.
        export SCD_SUBSCRIBER_SPARK_JARS_INSTALLED="${SCD_SUBSCRIBER_SPARK_JARS_INSTALLED:-true}"
    fi
    for ((i = 1; i <= SUBSCRIBERS; i++)); do
        name="subscriber-$i"
        if ! selected "$name" || running "$name"; then
            continue
        fi
        local store="$CLUSTER_DIR/stores/$name"
        if [[ "$s3a" == 1 ]]; then
            store="s3a://$CONTENT_BUCKET/$name"
        else
            mkdir -p "$CLUSTER_DIR/stores"
        fi
        launch_subscriber "$i" "$store"
    done
    # Up means every subscriber holds a position: a package distributed once this returns
    # reaches each of them, even while their stores are still opening.
    for ((i = 1; i <= SUBSCRIBERS; i++)); do
        selected "subscriber-$i" || continue
        wait_http "subscriber-$i" "http://127.0.0.1:$(subscriber_port "$i")/health" \
            "$SUBSCRIBER_START_TIMEOUT_S" '"holdsPosition":true' \
            || scd_die "subscriber-$i failed to start"
    done
    scd_log "cluster up in $(scd_elapsed "$started")s; publisher http://127.0.0.1:$PUBLISHER_PORT" \
        "(API token: $token_source)"
    cmd_status || true
}

# ---------------------------------------------------------------- status, down, logs

# port_of NAME: the port its status is read from.
port_of() {
    case "$1" in
        publisher) echo "$PUBLISHER_PORT" ;;
        subscriber-*) subscriber_port "${1#subscriber-}" ;;
        spark-master) echo "$SPARK_PORT" ;;
        spark-worker) echo "$SPARK_WORKER_UI_PORT" ;;
    esac
}

# ready_of NAME: "yes", "no" or "-" (not running), plus details, for the status table.
ready_of() {
    local name="$1" body
    case "$name" in
        publisher)
            http_ok "http://127.0.0.1:$PUBLISHER_PORT/ready" && echo yes || echo no ;;
        subscriber-*)
            local port offset start
            port="$(subscriber_port "${name#subscriber-}")"
            body="$(curl -s --max-time "$SCD_PROBE_REQUEST_TIMEOUT_S" "http://127.0.0.1:$port/health" 2>/dev/null)" \
                || { echo no; return; }
            offset="$(sed -n 's/.*"processedOffset":\([-0-9a-z]*\).*/\1/p' <<<"$body")"
            # Where a new store starts, fixed when the process started (null: not yet).
            start="$(sed -n 's/.*"startOffset":\([-0-9a-z]*\).*/\1/p' <<<"$body")"
            if http_ok "http://127.0.0.1:$port/ready"; then
                echo "yes offset=${offset:-?} start=${start:-?}"
            else
                echo "no offset=${offset:-?} start=${start:-?}"
            fi ;;
        spark-master)
            http_ok "http://127.0.0.1:$SPARK_UI_PORT/json/" ALIVE && echo yes || echo no ;;
        spark-worker)
            http_ok "http://127.0.0.1:$SPARK_WORKER_UI_PORT/json/" && echo yes || echo no ;;
    esac
}

cmd_status() {
    local name pid exitfile rc=0
    use_conf
    if ((CONF_SUBSCRIBERS == 0)); then
        echo "no cluster has been started in $CLUSTER_DIR"
        return 3
    fi
    printf '%-14s %-8s %-6s %s\n' NAME PID PORT READY
    for name in $(names); do
        exitfile="$(scd_exit_file "$(pidfile "$name")")"
        if running "$name"; then
            pid="$(<"$(pidfile "$name")")"
            printf '%-14s %-8s %-6s %s\n' "$name" "$pid" "$(port_of "$name")" "$(ready_of "$name")"
        elif [[ -s "$exitfile" ]]; then
            printf '%-14s %-8s %-6s %s\n' "$name" - "$(port_of "$name")" "exited $(<"$exitfile")"
            rc=3
        else
            printf '%-14s %-8s %-6s %s\n' "$name" - "$(port_of "$name")" stopped
            rc=3
        fi
    done
    return "$rc"
}

cmd_down() {
    local name pids=() pid rc=0
    use_conf
    select_names "$@"
    # Subscribers first (in parallel: each may finish an import), then the publisher, then
    # Spark, then the servers this cluster started.
    for name in $(names); do
        if [[ "$name" == subscriber-* ]] && selected "$name"; then
            stop "$name" "$SUBSCRIBER_STOP_TIMEOUT_S" & pids+=($!)
        fi
    done
    for pid in "${pids[@]}"; do
        wait "$pid" || rc=1
    done
    if selected publisher; then
        stop publisher "$PUBLISHER_STOP_TIMEOUT_S" || rc=1
    fi
    for name in spark-worker spark-master; do
        if [[ "$CONF_SPARK_STANDALONE" == 1 ]] && selected "$name"; then
            stop "$name" "$SPARK_STOP_TIMEOUT_S" || rc=1
        fi
    done
    if (($# > 0)); then
        return "$rc"
    fi
    if [[ "$CONF_STARTED_S3" == 1 ]]; then
        "$SCD_DEPLOY_DIR/s3.sh" stop || rc=1
    fi
    if [[ "$CONF_STARTED_KAFKA" == 1 ]]; then
        "$SCD_DEPLOY_DIR/kafka.sh" stop || rc=1
    fi
    CONF_STARTED_KAFKA=0 CONF_STARTED_S3=0
    [[ -f "$CONF_FILE" ]] && write_conf
    return "$rc"
}

cmd_logs() {
    local name="${1:-}" file
    use_conf
    if [[ -z "$name" ]]; then
        for file in "$LOG_DIR"/*.log; do
            [[ -f "$file" ]] || scd_die "no logs yet in $LOG_DIR"
            printf '==> %s <==\n' "$file"
            tail -n 20 "$file"
        done
        return 0
    fi
    pattern_of "$name" >/dev/null
    file="$(logfile "$name")"
    [[ -f "$file" ]] || scd_die "no log yet at $file"
    if [[ "${2:-}" == "-f" ]]; then
        exec tail -n 100 -f "$file"
    fi
    tail -n 100 "$file"
}

case "${1:-}" in
    up | down) scd_lock cluster ;;
esac
case "${1:-}" in
    up) shift; cmd_up "$@" ;;
    down) shift; cmd_down "$@" ;;
    status) cmd_status ;;
    logs) shift; cmd_logs "$@" ;;
    *) usage ;;
esac
