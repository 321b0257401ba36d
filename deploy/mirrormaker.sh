#!/usr/bin/env bash
# MirrorMaker 2 (Apache Kafka's own cross-cluster mirroring, dedicated mode) for development and
# the region tests: it copies topics between the brokers deploy/kafka.sh starts.
#
#   deploy/mirrormaker.sh install|start|stop|restart|status|logs [-f]|wipe
#
# MirrorMaker keeps its state (offsets, configs, checkpoints) in topics on the clusters it
# mirrors between, not on disk: wipe only removes the instance's generated files.
#
# Everything lives under $SCD_HOME (default ~/.scd):
#   mirrormaker/lib/       jars, fetched from Maven Central with deploy/mirrormaker/pom.xml
#   <name>/mm2.properties  the configuration the instance runs with (a copy of SCD_MM2_CONFIG)
#   logs/<name>.log        MirrorMaker output      run/<name>.pid   pid of the running process
#
# Environment:
#   SCD_MM2_NAME           instance name, default "mirrormaker"
#   SCD_MM2_CONFIG         the MirrorMaker 2 properties file (clusters, flows, topics); start
#                          needs it
#   SCD_MM2_START_TIMEOUT  seconds to wait until MirrorMaker reports it started, default 120
set -euo pipefail
# shellcheck source=deploy/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

MM2_NAME="${SCD_MM2_NAME:-mirrormaker}"
MM2_LIB_DIR="$SCD_HOME/mirrormaker/lib"
MM2_INSTANCE_DIR="$SCD_HOME/$MM2_NAME"
MM2_CONF="$MM2_INSTANCE_DIR/mm2.properties"
MM2_PIDFILE="$SCD_HOME/run/$MM2_NAME.pid"
MM2_LOG="$SCD_HOME/logs/$MM2_NAME.log"
# The broker's logging setup suits MirrorMaker too: everything to stdout, INFO.
MM2_LOG4J="$SCD_DEPLOY_DIR/kafka/log4j2.properties"
# Starting the herders and their Connect workers takes 5-20 s on a 2-core machine; 120 s
# leaves room for a loaded CI runner while still failing a hung start.
MM2_START_TIMEOUT_S="${SCD_MM2_START_TIMEOUT:-120}"
# Stopping the connectors commits their offsets: a few seconds; after 30 s it is killed.
MM2_STOP_TIMEOUT_S=30
# What identifies our process in /proc/<pid>/cmdline.
MM2_PROC_PATTERN="org.apache.kafka.connect.mirror.MirrorMaker $MM2_CONF"
# What MirrorMaker logs once every herder has started (org.apache.kafka.connect.mirror.MirrorMaker).
MM2_STARTED_LINE="Kafka MirrorMaker started"

jars_fingerprint() { sha256sum "$SCD_DEPLOY_DIR/mirrormaker/pom.xml" | cut -c1-16; }

cmd_install() {
    local marker="$SCD_HOME/mirrormaker/.installed" fp started
    fp="$(jars_fingerprint)"
    [[ -f "$marker" && "$(<"$marker")" == "$fp" ]] && return 0
    command -v java >/dev/null || scd_die "java not found (MirrorMaker needs Java 17+)"
    started="$(scd_now)"
    scd_log "fetching MirrorMaker 2 jars into $MM2_LIB_DIR"
    scd_fetch_jars "$SCD_DEPLOY_DIR/mirrormaker/pom.xml" "$MM2_LIB_DIR" \
        "$SCD_HOME/logs/mirrormaker-install.log"
    echo "$fp" >"$marker"
    scd_log "installed MirrorMaker 2 ($(du -sh "$MM2_LIB_DIR" | cut -f1)) in $(scd_elapsed "$started")s"
}

mm2_running() { scd_pid_alive "$MM2_PIDFILE" "$MM2_PROC_PATTERN"; }


cmd_start() {
    local started config="${SCD_MM2_CONFIG:-}" log_bytes pid
    started="$(scd_now)"
    [[ -n "$config" ]] || scd_die "set SCD_MM2_CONFIG to a MirrorMaker 2 properties file"
    [[ -f "$config" ]] || scd_die "SCD_MM2_CONFIG: no file at $config"
    cmd_install
    mkdir -p "$MM2_INSTANCE_DIR" "$SCD_HOME/run" "$SCD_HOME/logs"
    if mm2_running; then
        if cmp -s "$config" "$MM2_CONF"; then
            scd_log "MirrorMaker '$MM2_NAME' already running (pid $(<"$MM2_PIDFILE"))"
            return 0
        fi
        scd_log "MirrorMaker '$MM2_NAME' runs with a different configuration; restarting it"
        cmd_stop
    fi
    cp "$config" "$MM2_CONF"
    touch "$MM2_LOG"
    log_bytes="$(stat -c %s "$MM2_LOG")"
    scd_launch "$MM2_PIDFILE" "$MM2_LOG" "MirrorMaker $MM2_NAME" \
        java -Xmx256m -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
        -Dlog4j2.configurationFile="$MM2_LOG4J" -cp "$MM2_LIB_DIR/*" \
        org.apache.kafka.connect.mirror.MirrorMaker "$MM2_CONF"
    pid="$(<"$MM2_PIDFILE")"
    if ! scd_wait_ready "MirrorMaker '$MM2_NAME'" "$pid" "$MM2_START_TIMEOUT_S" "$MM2_LOG" \
        scd_log_has "$MM2_LOG" "$log_bytes" "$MM2_STARTED_LINE"; then
        cmd_stop
        scd_die "MirrorMaker '$MM2_NAME' failed to start"
    fi
    scd_log "MirrorMaker '$MM2_NAME' started (pid $pid) in $(scd_elapsed "$started")s"
}

cmd_stop() {
    scd_stop "MirrorMaker '$MM2_NAME'" "$MM2_PIDFILE" "$MM2_PROC_PATTERN" "$MM2_STOP_TIMEOUT_S"
}

cmd_wipe() {
    mm2_running && scd_die "MirrorMaker '$MM2_NAME' is running; stop it before wiping"
    rm -rf "$MM2_INSTANCE_DIR"
    scd_log "removed the files of MirrorMaker '$MM2_NAME' ($MM2_INSTANCE_DIR)"
}

cmd_status() {
    if mm2_running; then
        echo "MirrorMaker '$MM2_NAME' running: pid $(<"$MM2_PIDFILE"), config $MM2_CONF, log $MM2_LOG"
        return 0
    fi
    echo "MirrorMaker '$MM2_NAME' not running"
    return 3
}

scd_service_main "$MM2_NAME" "$MM2_LOG" "$@"
