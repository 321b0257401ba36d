# Shared helpers for the deploy/ scripts (sourced, not executed): launching, readiness waits and
# stopping of every daemon they run, the S3 call, and where the native servers listen.
#
# Environment:
#   SCD_HOME     everything the scripts install or write, default ~/.scd
#   SCD_VENV     the virtualenv of the scripts, default .venv in the checkout (CI keeps one
#                outside its fresh clones, see .ci/run)
#   SCD_PYTHON   the Python 3.11 that creates that virtualenv, default python3.11
# shellcheck shell=bash
# shellcheck disable=SC2034  # the variables are used by the scripts that source this file

SCD_HOME="${SCD_HOME:-${HOME:?set HOME or SCD_HOME}/.scd}"
SCD_DEPLOY_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SCD_REPO_DIR="$(cd "$SCD_DEPLOY_DIR/.." && pwd)"
export SCD_HOME
VENV="${SCD_VENV:-$SCD_REPO_DIR/.venv}"

# Where the native servers listen and how the S3 one is reached (each can be overridden by the
# SCD_* variable of that name, documented in kafka.sh and s3.sh).
KAFKA_PORT="${SCD_KAFKA_PORT:-19092}"
KAFKA_BOOTSTRAP="127.0.0.1:$KAFKA_PORT"
S3_PORT="${SCD_S3_PORT:-19000}"
S3_ENDPOINT="http://127.0.0.1:$S3_PORT"
S3_ACCESS_KEY="${SCD_S3_ACCESS_KEY:-scdadmin}"
S3_SECRET_KEY="${SCD_S3_SECRET_KEY:-scdadmin-secret}"
S3_REGION="${SCD_S3_REGION:-us-east-1}"

# Each request of a readiness probe gets 2 s: plenty on localhost, short enough to retry often.
SCD_PROBE_REQUEST_TIMEOUT_S=2
# SHA-256 of an empty body: S3 servers require the x-amz-content-sha256 header.
SCD_EMPTY_SHA256=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
# After a daemon exits, the rest of its process group (a Spark JVM, Python workers) follows
# within seconds (the JVM notices its parent's pipe closing); what is left after this is killed.
SCD_GROUP_EXIT_TIMEOUT_S=10
# The launcher's watcher records a pid or an exit status within moments; 5 s covers a busy
# machine.
SCD_WATCHER_TIMEOUT_S=5

scd_log() { printf '[%s] %s\n' "$(basename "$0")" "$*" >&2; }
scd_die() { scd_log "error: $*"; exit 1; }

# Seconds since the epoch with millisecond precision, for phase timings.
scd_now() { date +%s.%N; }
scd_elapsed() { awk -v a="$1" -v b="$(scd_now)" 'BEGIN { printf "%.1f", b - a }'; }

# scd_proc_alive PID: true while PID exists and is not a zombie (an exited child that no parent
# has reaped yet still answers kill -0).
scd_proc_alive() {
    local state
    state="$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" || return 1
    [[ -n "$state" && "$state" != Z && "$state" != X ]]
}

# scd_group_alive PGID: true while any process of the group (not a zombie) is left.
scd_group_alive() {
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

# scd_pid_alive PIDFILE PATTERN: true when the pid file names a live process whose command line
# contains PATTERN (guards against a recycled pid belonging to something else).
scd_pid_alive() {
    local pidfile="$1" pattern="$2" pid
    [[ -s "$pidfile" ]] || return 1
    pid="$(<"$pidfile")"
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    scd_proc_alive "$pid" || return 1
    # Without -q, grep reads to the end: tr never dies of SIGPIPE (pipefail).
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -F -- "$pattern" >/dev/null
}

# scd_require_free_ports HINT PORT...: dies when something already accepts TCP connections on
# 127.0.0.1:PORT; HINT says what to do about it.
scd_require_free_ports() {
    local hint="$1" port
    shift
    for port in "$@"; do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            scd_die "port $port is in use by a process this script did not start ($hint)"
        fi
    done
}

# scd_wait_while SECONDS COMMAND [ARGS...]: runs COMMAND every 0.2 s (so that a quick change
# is seen quickly) while it succeeds, for at most SECONDS (whole); fails if it still does then.
scd_wait_while() {
    local ticks=$(($1 * 5)) waited=0
    shift
    while "$@"; do
        ((waited >= ticks)) && return 1
        sleep 0.2
        waited=$((waited + 1))
    done
}

# scd_exit_file PIDFILE: where scd_launch records the exit status of the daemon PIDFILE names.
scd_exit_file() { echo "${1%.pid}.exit"; }

# scd_launch PIDFILE LOG WHAT COMMAND [ARGS...]: starts COMMAND as a daemon with the variables
# the caller exports, its output appended to LOG, its pid in PIDFILE. It runs in a session of
# its own (setsid): signals aimed at the shell or test run that started it do not reach it, and
# its pid is its process group id, so that scd_stop reaches its children. Its parent, a small
# watcher in another session, writes its exit status to scd_exit_file PIDFILE (as the shell
# reports it: 128 + N when signal N killed it). Callers hold a lock on fd 9 (scd_lock), which
# the daemon must not inherit.
scd_launch() {
    local pidfile="$1" log="$2" what="$3" exitfile
    shift 3
    exitfile="$(scd_exit_file "$pidfile")"
    mkdir -p "$(dirname "$pidfile")" "$(dirname "$log")"
    rm -f "$pidfile" "$exitfile"
    printf '\n===== %s starting %s =====\n' "$(date -Is)" "$what" >>"$log"
    # shellcheck disable=SC2016  # expanded by the watcher's shell
    setsid bash -c 'setsid "${@:4}" >>"$2" 2>&1 </dev/null &
        echo "$!" >"$1"
        wait "$!"
        echo "$?" >"$3"' scd-watcher "$pidfile" "$log" "$exitfile" "$@" \
        </dev/null >/dev/null 2>&1 9>&- &
    scd_wait_while "$SCD_WATCHER_TIMEOUT_S" test ! -s "$pidfile" \
        || scd_die "starting $what: no pid recorded in $pidfile"
    scd_log "started $what (pid $(<"$pidfile"))"
}

# scd_log_has LOG BYTES TEXT: true once LOG, past its first BYTES, holds TEXT. grep reads to the
# end (no -q): with -q it stops at the match, tail dies of SIGPIPE once more than a pipe's 64 KiB
# follow it, and under pipefail every later check fails (MirrorMaker logs that much within
# seconds of the line a start waits for: a start that logged it after 9 s timed out at 120 s).
scd_log_has() {
    tail -c "+$(($2 + 1))" "$1" 2>/dev/null | grep -F -- "$3" >/dev/null
}

# scd_wait_ready NAME PID TIMEOUT_S LOG COMMAND [ARGS...]: runs COMMAND every 0.2 s until it
# succeeds. Fails, showing the end of LOG, as soon as PID exits (status 2) or after TIMEOUT_S
# (status 1).
scd_wait_ready() {
    local name="$1" pid="$2" timeout_s="$3" log="$4" deadline
    shift 4
    deadline=$((SECONDS + timeout_s))
    until "$@"; do
        if ! scd_proc_alive "$pid"; then
            scd_log "$name exited during startup"
            scd_tail_log "$log"
            return 2
        fi
        if ((SECONDS >= deadline)); then
            scd_log "$name not ready after ${timeout_s}s"
            scd_tail_log "$log"
            return 1
        fi
        sleep 0.2
    done
}

# scd_stop NAME PIDFILE PATTERN TIMEOUT_S: SIGTERM to the daemon PIDFILE names (checked as
# scd_pid_alive does), SIGKILL to its process group after TIMEOUT_S, then to whatever of the
# group outlives it by SCD_GROUP_EXIT_TIMEOUT_S.
scd_stop() {
    local name="$1" pidfile="$2" pattern="$3" timeout_s="$4" exitfile pid
    exitfile="$(scd_exit_file "$pidfile")"
    if ! scd_pid_alive "$pidfile" "$pattern"; then
        rm -f "$pidfile" "$exitfile"
        scd_log "$name is not running"
        return 0
    fi
    pid="$(<"$pidfile")"
    kill -TERM "$pid" 2>/dev/null || true
    if ! scd_wait_while "$timeout_s" scd_proc_alive "$pid"; then
        scd_log "$name (pid $pid) did not exit within ${timeout_s}s of SIGTERM; sending SIGKILL"
        kill -KILL -- "-$pid" 2>/dev/null || true
    fi
    if ! scd_wait_while "$SCD_GROUP_EXIT_TIMEOUT_S" scd_group_alive "$pid"; then
        scd_log "$name: killing what is left of its process group"
        kill -KILL -- "-$pid" 2>/dev/null || true
        # SIGKILL cannot be ignored: the group is gone within moments.
        scd_wait_while 5 scd_group_alive "$pid" || true
    fi
    # The watcher records the status right after the exit: a daemon stopped here shows none.
    scd_wait_while "$SCD_WATCHER_TIMEOUT_S" test ! -e "$exitfile" || true
    rm -f "$pidfile" "$exitfile"
    scd_log "$name stopped"
}

# scd_s3 METHOD PATH [CURL_ARGS...]: one call to the S3 server at S3_ENDPOINT, signed with SigV4
# (S3_ACCESS_KEY, S3_SECRET_KEY, S3_REGION); the answer on stdout.
scd_s3() {
    local method="$1" path="$2"
    shift 2
    curl -sS --max-time "$SCD_PROBE_REQUEST_TIMEOUT_S" -X "$method" \
        --aws-sigv4 "aws:amz:$S3_REGION:s3" --user "$S3_ACCESS_KEY:$S3_SECRET_KEY" \
        -H "x-amz-content-sha256: $SCD_EMPTY_SHA256" "$@" "$S3_ENDPOINT$path"
}

# scd_fetch_jars POM DIR LOG [MVN_ARGS...]: the runtime dependencies of POM into DIR with Maven
# (its output in LOG); DIR is replaced only once every jar is fetched.
scd_fetch_jars() {
    local pom="$1" dir="$2" log="$3"
    shift 3
    command -v mvn >/dev/null || scd_die "mvn not found (Maven fetches the jars of $pom)"
    mkdir -p "$(dirname "$dir")" "$(dirname "$log")"
    rm -rf "$dir.tmp"
    if ! mvn -B -f "$pom" "$@" dependency:copy-dependencies -DincludeScope=runtime \
        -DoutputDirectory="$dir.tmp" >"$log" 2>&1; then
        scd_tail_log "$log"
        scd_die "fetching the jars of $pom failed"
    fi
    rm -rf "$dir"
    mv "$dir.tmp" "$dir"
}

# scd_find_go MIN_MINOR: prints the path of a go command of version 1.MIN_MINOR or newer: the
# installed one when recent enough, else the toolchain pinned in deploy/go-toolchain.env,
# fetched once into $SCD_HOME/go as the Go module golang.org/toolchain and checked against its
# SHA-256.
scd_find_go() {
    local min_minor="$1" version arch module root zip expected
    if command -v go >/dev/null; then
        version="$(go env GOVERSION 2>/dev/null || true)"
        if [[ "$version" =~ ^go1\.([0-9]+) ]] && ((BASH_REMATCH[1] >= min_minor)); then
            command -v go
            return 0
        fi
    fi
    case "$(uname -m)" in
        x86_64) arch=amd64 ;;
        aarch64 | arm64) arch=arm64 ;;
        *) scd_die "no Go >= 1.$min_minor installed and no pinned toolchain for $(uname -m)" ;;
    esac
    # shellcheck source=deploy/go-toolchain.env
    source "$SCD_DEPLOY_DIR/go-toolchain.env"
    expected="GO_TOOLCHAIN_SHA256_$arch"
    module="golang.org/toolchain@v0.0.1-$GO_TOOLCHAIN_VERSION.linux-$arch"
    root="$SCD_HOME/go/$module"
    if [[ ! -x "$root/bin/go" ]]; then
        command -v curl >/dev/null || scd_die "curl not found (needed to fetch the Go toolchain)"
        scd_log "no Go >= 1.$min_minor found; fetching $GO_TOOLCHAIN_VERSION from the Go module proxy"
        mkdir -p "$SCD_HOME/go"
        zip="$SCD_HOME/go/toolchain.zip"
        curl -fsSL --retry 3 -o "$zip" \
            "https://proxy.golang.org/golang.org/toolchain/@v/v0.0.1-$GO_TOOLCHAIN_VERSION.linux-$arch.zip"
        echo "${!expected}  $zip" | sha256sum -c --quiet - \
            || scd_die "checksum mismatch for the downloaded Go toolchain"
        rm -rf "$root"
        if command -v unzip >/dev/null; then
            unzip -q -o "$zip" -d "$SCD_HOME/go"
        else
            python3 -m zipfile -e "$zip" "$SCD_HOME/go"
        fi
        rm -f "$zip"
        # Module zips carry no file modes (the go command sets them the same way).
        chmod +x "$root"/bin/* "$root"/pkg/tool/*/*
    fi
    echo "$root/bin/go"
}

# scd_lock NAME: holds an exclusive lock on fd 9 until the script exits, so that concurrent
# start/stop calls for one service instance (say, two test runs) take turns. Processes started
# while holding it must not inherit fd 9 (scd_launch closes it).
scd_lock() {
    # The first start of a service can include an install of several minutes (a Go build on
    # two cores); a waiter gives up after 30 minutes.
    local wait_s=1800
    command -v flock >/dev/null || return 0
    mkdir -p "$SCD_HOME/run"
    exec 9>"$SCD_HOME/run/$1.lock"
    flock -w "$wait_s" 9 || scd_die "gave up waiting for $SCD_HOME/run/$1.lock"
}

# scd_tail_log FILE: the end of a service log, shown when a start fails.
scd_tail_log() {
    if [[ -f "$1" ]]; then
        scd_log "last lines of $1:"
        tail -n 40 "$1" >&2
    fi
}

# scd_service_main NAME LOG [command args...]: the command line of a service script, which
# defines cmd_install, cmd_start, cmd_stop, cmd_wipe and cmd_status; commands that change the
# service hold its lock.
scd_service_main() {
    local name="$1" log="$2"
    shift 2
    case "${1:-}" in
        install | start | stop | restart | wipe) scd_lock "$name" ;;
    esac
    case "${1:-}" in
        install) cmd_install ;;
        start) cmd_start ;;
        stop) cmd_stop ;;
        restart) cmd_stop; cmd_start ;;
        wipe) cmd_wipe ;;
        status) cmd_status ;;
        logs)
            [[ -f "$log" ]] || scd_die "no log yet at $log"
            if [[ "${2:-}" == "-f" ]]; then
                exec tail -n 100 -f "$log"
            fi
            tail -n 100 "$log"
            ;;
        *) echo "usage: $0 install|start|stop|restart|status|logs [-f]|wipe" >&2; exit 2 ;;
    esac
}

# scd_ensure_venv: $VENV with Python 3.11 and scd installed (editable, from this checkout) with
# its test extras; creates it when missing and reinstalls only after pyproject.toml changed or
# when it was installed from another checkout.
scd_ensure_venv() {
    PYTHON="${SCD_PYTHON:-python3.11}"
    STAMP="$VENV/.scd-installed"

    if [[ ! -x "$VENV/bin/python" ]]; then
        command -v "$PYTHON" >/dev/null || scd_die "$PYTHON not found (scd needs Python 3.11)"
        scd_log "creating $VENV with $PYTHON"
        "$PYTHON" -m venv "$VENV"
    fi
    "$VENV/bin/python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
        || scd_die "$VENV is not a Python 3.11 environment; remove it and run again"

    local fingerprint started
    fingerprint="$(sha256sum "$SCD_REPO_DIR/pyproject.toml" | cut -c1-16) $SCD_REPO_DIR"
    if [[ ! -f "$STAMP" || "$(<"$STAMP")" != "$fingerprint" ]]; then
        started="$(scd_now)"
        scd_log "installing scd and its test dependencies into $VENV"
        "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
        # setuptools tells every editable install to beware of same-named folders in the
        # working directory (a warning, printed even with --quiet): a banner, not news.
        PYTHONWARNINGS="ignore:Editable installation" \
            "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "${SCD_REPO_DIR}[test]"
        echo "$fingerprint" >"$STAMP"
        scd_log "installed in $(scd_elapsed "$started")s"
    fi
}
