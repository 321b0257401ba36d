#!/usr/bin/env bash
# The local cluster in containers (deploy/docker-compose.yml) in one command.
#
#   deploy/compose.sh up        installs and starts the engine when needed (deploy/docker.sh),
#                               builds what is missing or changed, writes deploy/.env with
#                               fresh random secrets when there is none, starts the cluster and
#                               returns once every service is healthy: each subscriber then
#                               holds a position in the package log, so a package distributed
#                               from then on reaches all three
#   deploy/compose.sh down [-v] stops and removes the containers (-v: and the data volumes)
#   deploy/compose.sh env       export lines for a client on this machine:
#                               eval "$(deploy/compose.sh env)" (SCD_PUBLISHER_URL: the first
#                               publisher replica; SCD_COMPOSE_PUBLISHER_URLS: both)
#   deploy/compose.sh build     builds the images (cached: seconds when nothing changed)
#   deploy/compose.sh ps|logs|config|pause|unpause|kill|start|stop|restart|exec ... [ARGS]
#                               that docker compose command on this cluster's files
#
# Environment:
#   SCD_COMPOSE_IMAGES          image set: local (default; every image built here from
#                               package registries) or public (public images where there are,
#                               see deploy/docker-compose.public.yml)
#   SCD_COMPOSE_UP_TIMEOUT_S    how long up waits for every service to be healthy, default 600
set -euo pipefail
# shellcheck source=deploy/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

IMAGE_SET="${SCD_COMPOSE_IMAGES:-local}"
ENV_FILE="$SCD_DEPLOY_DIR/.env"
ENV_EXAMPLE="$SCD_DEPLOY_DIR/.env.example"
COMPOSE_FILES=(-f "$SCD_DEPLOY_DIR/docker-compose.yml")
case "$IMAGE_SET" in
    local) ;;
    public) COMPOSE_FILES+=(-f "$SCD_DEPLOY_DIR/docker-compose.public.yml") ;;
    *) scd_die "SCD_COMPOSE_IMAGES must be local or public, not '$IMAGE_SET'" ;;
esac
# The first start after a build: three Spark drivers register with the master and open their
# stores on a 2-core machine; 10 minutes also covers a loaded CI runner.
UP_TIMEOUT_S="${SCD_COMPOSE_UP_TIMEOUT_S:-600}"

compose() { docker compose --env-file "$ENV_FILE" "${COMPOSE_FILES[@]}" "$@"; }

# random_secret: 48 hex characters from the kernel's generator.
random_secret() { od -An -N24 -tx1 /dev/urandom | tr -d ' \n'; }

# ensure_env_file: deploy/.env from deploy/.env.example, every empty secret filled with a fresh
# random value (readable by this user only); an existing file is left as it is.
ensure_env_file() {
    local line name
    [[ -f "$ENV_FILE" ]] && return 0
    (
        umask 077
        while IFS= read -r line; do
            name="${line%%=*}"
            case "$line" in
                SCD_COMPOSE_API_TOKEN= | SCD_COMPOSE_S3_SECRET_KEY=) line="$name=$(random_secret)" ;;
                SCD_COMPOSE_S3_ACCESS_KEY=) line="$name=scd-$(random_secret | cut -c1-12)" ;;
            esac
            printf '%s\n' "$line"
        done <"$ENV_EXAMPLE" >"$ENV_FILE.tmp"
        mv "$ENV_FILE.tmp" "$ENV_FILE"
    )
    scd_log "created $ENV_FILE with fresh random secrets (API token, S3 keys); keep it private"
}

# env_value NAME DEFAULT: NAME's value in deploy/.env, else DEFAULT.
env_value() {
    local value
    value="$(sed -n "s/^$1=//p" "$ENV_FILE" 2>/dev/null | tail -n 1)"
    echo "${value:-$2}"
}

# prepare: the engine answers and deploy/.env exists; for the local set, the base image exists
# and its tag is what the builds start from.
prepare() {
    if ! docker info >/dev/null 2>&1 || ! docker compose version >/dev/null 2>&1; then
        "$SCD_DEPLOY_DIR/docker.sh" install
        "$SCD_DEPLOY_DIR/docker.sh" start
    fi
    ensure_env_file
    if [[ "$IMAGE_SET" == local ]]; then
        SCD_COMPOSE_BASE_IMAGE="$("$SCD_DEPLOY_DIR/docker.sh" base)"
        export SCD_COMPOSE_BASE_IMAGE
    fi
}

cmd_build() {
    local started log="$SCD_HOME/logs/compose-build.$$.log"
    started="$(scd_now)"
    prepare
    scd_log "building the $IMAGE_SET image set (log: $log)"
    mkdir -p "$SCD_HOME/logs"
    if ! compose --progress plain build "$@" >"$log" 2>&1; then
        scd_tail_log "$log"
        scd_die "building the images failed"
    fi
    # One log per build (builds of concurrent callers share BuildKit's work, not their logs);
    # the last successful one stays as compose-build.log.
    mv "$log" "$SCD_HOME/logs/compose-build.log"
    scd_log "images built in $(scd_elapsed "$started")s"
}

# unhealthy_services: the services of the cluster that are not (yet) healthy or done, one line
# each with their state.
unhealthy_services() {
    compose ps -a --format '{{.Service}}|{{.State}}|{{.Health}}|{{.ExitCode}}' \
        | awk -F'|' '!(($2 == "running" && ($3 == "healthy" || $3 == "")) || ($2 == "exited" && $4 == 0))'
}

cmd_up() {
    local started rc deadline
    started="$(scd_now)"
    cmd_build
    scd_log "starting the cluster"
    deadline=$((SECONDS + UP_TIMEOUT_S))
    # On a loaded machine a healthcheck can fail a few times in a row (a probe slower than its
    # timeout) and the service shows unhealthy for a moment: compose then gives up on what
    # depends on it ("dependency failed to start") although it turns healthy seconds later.
    # up is idempotent: ask again until the deadline.
    while :; do
        rc=0
        compose up -d --wait --wait-timeout "$((deadline - SECONDS))" "$@" || rc=$?
        ((rc == 0)) && break
        if ((SECONDS + 10 >= deadline)); then
            scd_log "not every service became healthy within ${UP_TIMEOUT_S}s:"
            unhealthy_services >&2 || true
            scd_die "the cluster did not come up (logs: deploy/compose.sh logs SERVICE)"
        fi
        scd_log "not every service is healthy yet ($(unhealthy_services | cut -d'|' -f1,3 \
            | tr '\n' ' ')): starting the rest again"
        sleep 5
    done
    scd_log "cluster up in $(scd_elapsed "$started")s: publisher replicas on" \
        "http://127.0.0.1:$(env_value SCD_COMPOSE_PUBLISHER_PORT 28080) and" \
        "http://127.0.0.1:$(env_value SCD_COMPOSE_PUBLISHER_2_PORT 28082); every subscriber holds a position"
}

cmd_down() {
    [[ -f "$ENV_FILE" ]] || scd_die "no $ENV_FILE: nothing was started with this script"
    compose down "$@"
}

cmd_env() {
    [[ -f "$ENV_FILE" ]] || scd_die "no $ENV_FILE yet: run deploy/compose.sh up first"
    local s3 publisher
    s3="http://127.0.0.1:$(env_value SCD_COMPOSE_S3_PORT 29000)"
    publisher="http://127.0.0.1:$(env_value SCD_COMPOSE_PUBLISHER_PORT 28080)"
    # The first replica (either takes every request), then both, space-separated.
    printf 'export SCD_PUBLISHER_URL=%q\n' "$publisher"
    printf 'export SCD_COMPOSE_PUBLISHER_URLS=%q\n' \
        "$publisher http://127.0.0.1:$(env_value SCD_COMPOSE_PUBLISHER_2_PORT 28082)"
    printf 'export SCD_PUBLISHER_API_TOKEN=%q\n' "$(env_value SCD_COMPOSE_API_TOKEN '')"
    printf 'export SCD_JOURNAL_BOOTSTRAP_SERVERS=%q\n' "127.0.0.1:$(env_value SCD_COMPOSE_KAFKA_PORT 29092)"
    printf 'export SCD_BLOB_ENDPOINT_URL=%q\n' "$s3"
    printf 'export SCD_BLOB_ACCESS_KEY=%q\n' "$(env_value SCD_COMPOSE_S3_ACCESS_KEY '')"
    printf 'export SCD_BLOB_SECRET_KEY=%q\n' "$(env_value SCD_COMPOSE_S3_SECRET_KEY '')"
    printf 'export SCD_BLOB_REGION=us-east-1\n'
    # The blob store and the subscribers' stores as the compose file gives them to the
    # services, so that scd content reads a store from here (subscriber-1's by default).
    printf 'export SCD_BLOB_BACKEND=s3\n'
    printf 'export SCD_BLOB_BUCKET=scd-blobs\n'
    printf 'export SCD_SUBSCRIBER_STORE_PATH=s3a://scd-content/subscriber-1\n'
    printf 'export SCD_COMPOSE_SUBSCRIBER_URLS=%q\n' "$(printf 'http://127.0.0.1:%s ' \
        "$(env_value SCD_COMPOSE_SUBSCRIBER_1_PORT 28091)" \
        "$(env_value SCD_COMPOSE_SUBSCRIBER_2_PORT 28092)" \
        "$(env_value SCD_COMPOSE_SUBSCRIBER_3_PORT 28093)" | sed 's/ $//')"
}

case "${1:-}" in
    up) shift; cmd_up "$@" ;;
    down) shift; cmd_down "$@" ;;
    env) cmd_env ;;
    build) shift; cmd_build "$@" ;;
    ps | logs | config | pause | unpause | kill | start | stop | restart | exec | top | port | images)
        [[ -f "$ENV_FILE" ]] || scd_die "no $ENV_FILE yet: run deploy/compose.sh up first"
        [[ "$IMAGE_SET" == local ]] && export SCD_COMPOSE_BASE_IMAGE="${SCD_COMPOSE_BASE_IMAGE:-scd-base:bookworm}"
        compose "$@"
        ;;
    *)
        echo "usage: $0 up|down [-v]|env|build|ps|logs|config|pause|unpause|kill|start|stop|restart|exec ..." >&2
        exit 2
        ;;
esac
