#!/usr/bin/env bash
# The scd local cluster without Docker: the topology of deploy/docker-compose.yml as plain
# processes on this machine. Kafka and the S3 server (deploy/services.sh), one publisher
# (scd publisher) and N subscribers (scd subscriber), each subscriber with its own
# content store and health port, Spark local per subscriber or a standalone Spark master and
# worker started from the pyspark install.
#
#   deploy/cluster.sh up [--s3a] [--spark-standalone]   start what is not running, wait until
#                                                       every process answers, print the table
#   deploy/cluster.sh status                            the table; exit 0 only when all run
#   deploy/cluster.sh down                              stop what up started (data is kept)
#   deploy/cluster.sh logs [NAME] [-f]                  a process's log (all logs' ends if no NAME)
#
#   --s3a               content stores on the S3 server (s3a://) instead of local directories
#   --spark-standalone  a Spark master and one worker (one core and one executor per
#                       subscriber) instead of local Spark inside each subscriber
#
# Environment:
#   SCD_CLUSTER_SUBSCRIBERS          number of subscribers, default 3
#   SCD_CLUSTER_DIR                  state: pid files, API token, local stores, Spark work
#                                    directories; default $SCD_HOME/cluster
#   SCD_CLUSTER_LOG_DIR              process logs, default $SCD_HOME/logs/cluster
#   SCD_CLUSTER_PUBLISHER_PORT       publisher REST API on 127.0.0.1, default 18080
#   SCD_CLUSTER_SUBSCRIBER_PORT      health port of subscriber-1, default 18090 (subscriber-i
#                                    gets this + i - 1)
#   SCD_CLUSTER_SPARK_PORT           standalone master port, default 17077; its web UI is on
#                                    SCD_CLUSTER_SPARK_UI_PORT (default 18180), the worker's
#                                    on the port after it
#   SCD_CLUSTER_CONTENT_BUCKET       bucket of the s3a:// stores (--s3a), default scd-content
#   SCD_CLUSTER_KAFKA_BOOTSTRAP      use this running Kafka (host:port) ...
#   SCD_CLUSTER_S3_ENDPOINT          ... and this running S3 server (http://host:port) instead
#                                    of starting deploy/services.sh; credentials and region
#                                    from SCD_S3_ACCESS_KEY / SCD_S3_SECRET_KEY / SCD_S3_REGION
#                                    (the deploy/s3.sh variables and defaults)
# Settings of the daemons themselves (SCD_PUBLISHER_*, SCD_SUBSCRIBER_*, SCD_JOURNAL_*,
# SCD_BLOB_*) pass through from the environment: this script only fills in those left unset,
# except the per-subscriber agent name, store path and health port, which it assigns.
# Without SCD_PUBLISHER_API_TOKEN (and without SCD_PUBLISHER_DEV_MODE=true) a random token is
# generated once and kept in $SCD_CLUSTER_DIR/token.
set -euo pipefail
# shellcheck source=deploy/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

PYTHON="$SCD_REPO_DIR/.venv/bin/python"
# The daemons run as the installed command line: `python -m publisher` from some directory
# could import a ./publisher folder there instead of scd's.
SCD="$SCD_REPO_DIR/.venv/bin/scd"
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
S3_ACCESS_KEY="${SCD_S3_ACCESS_KEY:-$SCD_DEFAULT_S3_ACCESS_KEY}"
S3_SECRET_KEY="${SCD_S3_SECRET_KEY:-$SCD_DEFAULT_S3_SECRET_KEY}"
S3_REGION="${SCD_S3_REGION:-$SCD_DEFAULT_S3_REGION}"

# The publisher is ready within seconds (topics exist, the journal answers); 60 s covers a
# loaded machine and the first topic creation.
PUBLISHER_START_TIMEOUT_S=60
# A subscriber answers once its Spark driver runs and its store is open: 20-40 s each on a
# 2-core machine when three JVMs start at once, longer on a standalone master (executors
# start first).
# On a saturated 2-core machine the first s3a store creation alone was seen to take 3+ min,
# so the default leaves twice that; SCD_CLUSTER_START_TIMEOUT_S overrides it.
SUBSCRIBER_START_TIMEOUT_S="${SCD_CLUSTER_START_TIMEOUT_S:-600}"
# The standalone master and worker are up within seconds; 60 s leaves room for a busy machine.
SPARK_START_TIMEOUT_S=60
# SIGTERM grace periods before SIGKILL: a subscriber finishes the import in progress (its
# agent waits up to 60 s) and stops Spark; the publisher lets requests answer for up to 35 s
# (publisher/daemon.py); the Spark daemons stop at once.
SUBSCRIBER_STOP_TIMEOUT_S=90
PUBLISHER_STOP_TIMEOUT_S=45
SPARK_STOP_TIMEOUT_S=15
# After a daemon exits, its children (the Spark JVM, Python workers) follow within seconds
# (the JVM notices its parent's pipe closing); what is left after this is killed.
CHILDREN_EXIT_TIMEOUT_S=10
# Each readiness request gets 2 s: plenty on localhost, short enough to retry often.
HTTP_PROBE_TIMEOUT_S=2
# Pause between readiness probes.
PROBE_INTERVAL_S=0.5
# Executors of the standalone worker: Spark's default of 1 GiB per subscriber application.
SPARK_EXECUTOR_MEMORY_GB=1
# SHA-256 of an empty body: S3 servers require the x-amz-content-sha256 header.
EMPTY_SHA256=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
# What identifies each kind of process in /proc/<pid>/cmdline.
PUBLISHER_PATTERN="bin/scd publisher"
SUBSCRIBER_PATTERN="bin/scd subscriber"
SPARK_MASTER_PATTERN="org.apache.spark.deploy.master.Master"
SPARK_WORKER_PATTERN="org.apache.spark.deploy.worker.Worker"

# ---------------------------------------------------------------- helpers

usage() {
    echo "usage: $0 up [--s3a] [--spark-standalone] | status | down | logs [NAME] [-f]" >&2
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

# http_ok URL: true when URL answers 2xx.
http_ok() { curl -sf --max-time "$HTTP_PROBE_TIMEOUT_S" -o /dev/null "$1"; }

# wait_http NAME URL TIMEOUT_S [GREP]: waits until URL answers 2xx (and its body contains
# GREP, if given); fails early when the process exits.
wait_http() {
    local name="$1" url="$2" timeout_s="$3" expect="${4:-}" deadline body
    deadline=$((SECONDS + timeout_s))
    while ((SECONDS < deadline)); do
        if body="$(curl -sf --max-time "$HTTP_PROBE_TIMEOUT_S" "$url" 2>/dev/null)" \
            && [[ -z "$expect" || "$body" == *"$expect"* ]]; then
            return 0
        fi
        if ! running "$name"; then
            scd_log "$name exited during startup"
            scd_tail_log "$(logfile "$name")"
            return 1
        fi
        sleep "$PROBE_INTERVAL_S"
    done
    scd_log "$name did not answer on $url within ${timeout_s}s"
    scd_tail_log "$(logfile "$name")"
    return 1
}

# launch NAME PORT COMMAND...: starts COMMAND in its own session (pid = process group id, so
# down can reach its children), with the variables exported by the caller.
launch() {
    local name="$1" port="$2" pid
    shift 2
    if scd_port_busy "$port"; then
        scd_die "port $port (for $name) is in use by a process this script did not start"
    fi
    mkdir -p "$RUN_DIR" "$LOG_DIR"
    printf '\n===== %s starting %s =====\n' "$(date -Is)" "$name" >>"$(logfile "$name")"
    # setsid: the daemons must not get the signals aimed at the shell or test run that started
    # them; they are stopped through their pid files.
    setsid "$@" >>"$(logfile "$name")" 2>&1 </dev/null 9>&- &
    pid=$!
    echo "$pid" >"$(pidfile "$name")"
    scd_log "started $name (pid $pid)"
}

# group_alive PGID: true while any process of the group (not a zombie) is left.
group_alive() {
    local stat rest
    local -a fields
    for stat in /proc/[0-9]*/stat; do
        { read -r rest <"$stat"; } 2>/dev/null || continue
        rest="${rest##*) }"  # after the command name, which may contain spaces
        read -r -a fields <<<"$rest"
        [[ "${fields[2]}" == "$1" && "${fields[0]}" != Z && "${fields[0]}" != X ]] && return 0
    done
    return 1
}

# stop NAME TIMEOUT_S: SIGTERM to the daemon, SIGKILL to its whole process group after
# TIMEOUT_S, then whatever of the group outlives it.
stop() {
    local name="$1" timeout_s="$2" pidfile pid
    pidfile="$(pidfile "$name")"
    if ! running "$name"; then
        rm -f "$pidfile"
        return 0
    fi
    pid="$(<"$pidfile")"
    kill -TERM "$pid" 2>/dev/null || true
    if ! scd_wait_while "$timeout_s" scd_proc_alive "$pid"; then
        scd_log "$name (pid $pid) did not exit within ${timeout_s}s of SIGTERM; sending SIGKILL"
        kill -KILL -- "-$pid" 2>/dev/null || true
    fi
    if ! scd_wait_while "$CHILDREN_EXIT_TIMEOUT_S" group_alive "$pid"; then
        scd_log "$name: killing what is left of its process group"
        kill -KILL -- "-$pid" 2>/dev/null || true
        # SIGKILL cannot be ignored: the group is gone within moments.
        scd_wait_while 5 group_alive "$pid" || true
    fi
    rm -f "$pidfile"
    scd_log "$name stopped"
}

# make_bucket NAME: creates an S3 bucket (an existing one is fine).
make_bucket() {
    local code
    code="$(curl -sS --max-time "$HTTP_PROBE_TIMEOUT_S" -o /dev/null -w '%{http_code}' -X PUT \
        --aws-sigv4 "aws:amz:$S3_REGION:s3" --user "$S3_ACCESS_KEY:$S3_SECRET_KEY" \
        -H "x-amz-content-sha256: $EMPTY_SHA256" "$S3_ENDPOINT/$1")" || code=000
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
    KAFKA_BOOTSTRAP="127.0.0.1:${SCD_KAFKA_PORT:-$SCD_DEFAULT_KAFKA_PORT}"
    S3_ENDPOINT="http://127.0.0.1:${SCD_S3_PORT:-$SCD_DEFAULT_S3_PORT}"
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
            launch spark-master "$SPARK_PORT" "$SCD_REPO_DIR/.venv/bin/spark-class" \
            org.apache.spark.deploy.master.Master --host 127.0.0.1 --port "$SPARK_PORT" \
            --webui-port "$SPARK_UI_PORT"
    fi
    wait_http spark-master "http://127.0.0.1:$SPARK_UI_PORT/json/" "$SPARK_START_TIMEOUT_S" ALIVE \
        || scd_die "the Spark master failed to start"
    if ! running spark-worker; then
        mkdir -p "$CLUSTER_DIR/spark/work"
        SPARK_WORKER_OPTS="-Dspark.worker.cleanup.enabled=true" \
            launch spark-worker "$SPARK_WORKER_UI_PORT" "$SCD_REPO_DIR/.venv/bin/spark-class" \
            org.apache.spark.deploy.worker.Worker --host 127.0.0.1 \
            --cores "$CONF_SUBSCRIBERS" --memory "$((CONF_SUBSCRIBERS * SPARK_EXECUTOR_MEMORY_GB))g" \
            --work-dir "$CLUSTER_DIR/spark/work" --webui-port "$SPARK_WORKER_UI_PORT" \
            "spark://127.0.0.1:$SPARK_PORT"
    fi
    # Registered: the master counts one alive worker.
    wait_http spark-worker "http://127.0.0.1:$SPARK_UI_PORT/json/" "$SPARK_START_TIMEOUT_S" \
        '"aliveworkers" : 1' || scd_die "the Spark worker did not register with the master"
}

cmd_up() {
    local s3a=0 standalone=0 started arg i name token_source jars
    for arg in "$@"; do
        case "$arg" in
            --s3a) s3a=1 ;;
            --spark-standalone) standalone=1 ;;
            *) usage ;;
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
    if running publisher; then
        :
    elif [[ -n "$token" ]]; then
        SCD_PUBLISHER_API_TOKEN="$token" SCD_PUBLISHER_HOST=127.0.0.1 \
            SCD_PUBLISHER_PORT="$PUBLISHER_PORT" launch publisher "$PUBLISHER_PORT" "$SCD" publisher
    else
        SCD_PUBLISHER_HOST=127.0.0.1 SCD_PUBLISHER_PORT="$PUBLISHER_PORT" \
            launch publisher "$PUBLISHER_PORT" "$SCD" publisher
    fi
    wait_http publisher "http://127.0.0.1:$PUBLISHER_PORT/ready" "$PUBLISHER_START_TIMEOUT_S" \
        || scd_die "the publisher failed to start (log: $(logfile publisher))"

    jars="$(spark_jars)"
    export SCD_SUBSCRIBER_SPARK_JARS="$jars"
    export SCD_SUBSCRIBER_PUB_AGENTS="${SCD_SUBSCRIBER_PUB_AGENTS:-${SCD_PUBLISHER_AGENT_NAME:-publish}}"
    if [[ "$standalone" == 1 ]]; then
        export SCD_SUBSCRIBER_SPARK_MASTER="spark://127.0.0.1:$SPARK_PORT"
    fi
    for ((i = 1; i <= SUBSCRIBERS; i++)); do
        name="subscriber-$i"
        running "$name" && continue
        local store="$CLUSTER_DIR/stores/$name"
        if [[ "$s3a" == 1 ]]; then
            store="s3a://$CONTENT_BUCKET/$name"
        else
            mkdir -p "$CLUSTER_DIR/stores"
        fi
        SCD_SUBSCRIBER_AGENT_NAME="$name" SCD_SUBSCRIBER_STORE_PATH="$store" \
            SCD_SUBSCRIBER_HTTP_PORT="$(subscriber_port "$i")" \
            launch "$name" "$(subscriber_port "$i")" "$SCD" subscriber
    done
    for ((i = 1; i <= SUBSCRIBERS; i++)); do
        wait_http "subscriber-$i" "http://127.0.0.1:$(subscriber_port "$i")/health" \
            "$SUBSCRIBER_START_TIMEOUT_S" || scd_die "subscriber-$i failed to start"
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
            local port offset
            port="$(subscriber_port "${name#subscriber-}")"
            body="$(curl -s --max-time "$HTTP_PROBE_TIMEOUT_S" "http://127.0.0.1:$port/health" 2>/dev/null)" \
                || { echo no; return; }
            offset="$(sed -n 's/.*"processedOffset":\([-0-9a-z]*\).*/\1/p' <<<"$body")"
            if http_ok "http://127.0.0.1:$port/ready"; then
                echo "yes offset=${offset:-?}"
            else
                echo "no offset=${offset:-?}"
            fi ;;
        spark-master)
            body="$(curl -s --max-time "$HTTP_PROBE_TIMEOUT_S" "http://127.0.0.1:$SPARK_UI_PORT/json/" 2>/dev/null)" || true
            [[ "$body" == *ALIVE* ]] && echo yes || echo no ;;
        spark-worker)
            http_ok "http://127.0.0.1:$SPARK_WORKER_UI_PORT/json/" && echo yes || echo no ;;
    esac
}

cmd_status() {
    local name pid rc=0
    use_conf
    if ((CONF_SUBSCRIBERS == 0)); then
        echo "no cluster has been started in $CLUSTER_DIR"
        return 3
    fi
    printf '%-14s %-8s %-6s %s\n' NAME PID PORT READY
    for name in $(names); do
        if running "$name"; then
            pid="$(<"$(pidfile "$name")")"
            printf '%-14s %-8s %-6s %s\n' "$name" "$pid" "$(port_of "$name")" "$(ready_of "$name")"
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
    # Subscribers first (in parallel: each may finish an import), then the publisher, then
    # Spark, then the servers this cluster started.
    for name in $(names); do
        if [[ "$name" == subscriber-* ]]; then
            stop "$name" "$SUBSCRIBER_STOP_TIMEOUT_S" & pids+=($!)
        fi
    done
    for pid in "${pids[@]}"; do
        wait "$pid" || rc=1
    done
    stop publisher "$PUBLISHER_STOP_TIMEOUT_S" || rc=1
    stop spark-worker "$SPARK_STOP_TIMEOUT_S" || rc=1
    stop spark-master "$SPARK_STOP_TIMEOUT_S" || rc=1
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
    down) cmd_down ;;
    status) cmd_status ;;
    logs) shift; cmd_logs "$@" ;;
    *) usage ;;
esac
