# Shared helpers for the deploy/ scripts (sourced, not executed).
# shellcheck shell=bash
# shellcheck disable=SC2034  # the variables are used by the scripts that source this file

SCD_HOME="${SCD_HOME:-${HOME:?set HOME or SCD_HOME}/.scd}"
SCD_DEPLOY_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SCD_REPO_DIR="$(cd "$SCD_DEPLOY_DIR/.." && pwd)"
export SCD_HOME

# Defaults shared by the scripts (each can be overridden by the SCD_* variable of that name).
SCD_DEFAULT_KAFKA_PORT=19092
SCD_DEFAULT_KAFKA_CONTROLLER_PORT=19093
SCD_DEFAULT_S3_PORT=19000
SCD_DEFAULT_S3_ACCESS_KEY=scdadmin
SCD_DEFAULT_S3_SECRET_KEY=scdadmin-secret
SCD_DEFAULT_S3_REGION=us-east-1

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

# scd_pid_alive PIDFILE PATTERN: true when the pid file names a live process whose command line
# contains PATTERN (guards against a recycled pid belonging to something else).
scd_pid_alive() {
    local pidfile="$1" pattern="$2" pid
    [[ -s "$pidfile" ]] || return 1
    pid="$(<"$pidfile")"
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    scd_proc_alive "$pid" || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$pattern"
}

# scd_port_busy PORT: true when something accepts TCP connections on 127.0.0.1:PORT.
scd_port_busy() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# scd_stop_pid PIDFILE PATTERN NAME TIMEOUT_S: SIGTERM, wait up to TIMEOUT_S, then SIGKILL.
scd_stop_pid() {
    local pidfile="$1" pattern="$2" name="$3" timeout_s="$4" pid
    if ! scd_pid_alive "$pidfile" "$pattern"; then
        rm -f "$pidfile"
        scd_log "$name is not running"
        return 0
    fi
    pid="$(<"$pidfile")"
    kill -TERM "$pid" 2>/dev/null || true
    if ! scd_wait_while "$timeout_s" scd_proc_alive "$pid"; then
        scd_log "$name (pid $pid) did not exit within ${timeout_s}s of SIGTERM; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        # SIGKILL cannot be ignored: the process is gone within moments.
        scd_wait_while 5 scd_proc_alive "$pid" || true
    fi
    rm -f "$pidfile"
    scd_log "$name stopped"
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

# scd_lock NAME: holds an exclusive lock on fd 9 until the script exits, so that concurrent
# start/stop calls for one service instance (say, two test runs) take turns. Processes started
# while holding it must not inherit fd 9 (launch them with 9>&-).
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

# scd_ensure_venv: .venv with Python 3.11 and scd installed with its test extras; creates it
# when missing and reinstalls only after pyproject.toml changed. Sets VENV.
scd_ensure_venv() {
    PYTHON="${SCD_PYTHON:-python3.11}"
    VENV="$SCD_REPO_DIR/.venv"
    STAMP="$VENV/.scd-installed"

    if [[ ! -x "$VENV/bin/python" ]]; then
        command -v "$PYTHON" >/dev/null || scd_die "$PYTHON not found (scd needs Python 3.11)"
        scd_log "creating $VENV with $PYTHON"
        "$PYTHON" -m venv "$VENV"
    fi
    "$VENV/bin/python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
        || scd_die "$VENV is not a Python 3.11 environment; remove it and run again"

    local fingerprint started
    fingerprint="$(sha256sum "$SCD_REPO_DIR/pyproject.toml" | cut -c1-16)"
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
