#!/usr/bin/env bash
# The Docker engine, the compose plugin and the base image of the local cluster's images.
#
#   deploy/docker.sh install   Debian's engine (docker.io) when dockerd is missing; the compose
#                              v2 plugin, built from the Go module proxy, when `docker compose`
#                              does not answer (the built binary is kept under $SCD_HOME/docker,
#                              so a second install only copies it)
#   deploy/docker.sh start     dockerd in the background when `docker info` fails; waits until
#                              it answers and remembers that this script started it
#   deploy/docker.sh stop      stops dockerd, only when this script started it
#   deploy/docker.sh status    exit 0 when the engine and the compose plugin answer
#   deploy/docker.sh base      builds the scd-base image when missing and prints its tag
#
# Every command is idempotent. Installing needs root (or sudo without a password).
#
# scd-base is Debian bookworm from debootstrap (--variant=minbase) with the packages listed in
# deploy/images/base/packages, imported with `docker import`: no image registry is involved.
# Its tag is a hash of that list and of this recipe, so it is rebuilt only when either changes;
# the newest build is also tagged scd-base:bookworm, which deploy/docker-compose.yml uses.
#
# Environment:
#   SCD_DEBIAN_MIRROR   Debian mirror for debootstrap and for apt inside the images,
#                       default http://deb.debian.org/debian
set -euo pipefail
# shellcheck source=deploy/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

COMPOSE_MODULE="github.com/docker/compose/v2"
COMPOSE_VERSION="v2.40.3"
# compose v2.40.3 declares `go 1.24.9` in its go.mod.
COMPOSE_GO_MIN_MINOR=24
COMPOSE_CACHE="$SCD_HOME/docker/docker-compose-$COMPOSE_VERSION"
CLI_PLUGINS_DIR="${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins"
DOCKER_STATE_DIR="$SCD_HOME/docker"
DOCKERD_PIDFILE="$SCD_HOME/run/dockerd.pid"
DOCKERD_LOG="$SCD_HOME/logs/dockerd.log"
# dockerd answers within seconds; a minute covers a loaded machine and the first start, which
# sets up its storage.
DOCKERD_START_TIMEOUT_S=60
# Running containers get their own stop timeout from dockerd (10 s by default) before it exits.
DOCKERD_STOP_TIMEOUT_S=60

DEBIAN_MIRROR="${SCD_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
DEBIAN_SUITE=bookworm
BASE_PACKAGES="$SCD_DEPLOY_DIR/images/base/packages"
BASE_REPO=scd-base
BASE_ALIAS="$BASE_REPO:$DEBIAN_SUITE"

as_root() {
    if ((EUID == 0)); then
        "$@"
    else
        sudo -n "$@"
    fi
}

engine_answers() { docker info >/dev/null 2>&1; }
compose_answers() { docker compose version >/dev/null 2>&1; }

install_engine() {
    command -v dockerd >/dev/null && command -v docker >/dev/null && return 0
    command -v apt-get >/dev/null || scd_die "dockerd not found and no apt-get to install docker.io"
    scd_log "installing Debian's Docker engine (docker.io)"
    as_root apt-get update -q
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -q --no-install-recommends \
        docker.io
}

install_compose() {
    local go_cmd dir src started log="$SCD_HOME/logs/compose-build.log"
    compose_answers && return 0
    mkdir -p "$CLI_PLUGINS_DIR" "$DOCKER_STATE_DIR" "$SCD_HOME/logs"
    if [[ ! -x "$COMPOSE_CACHE" ]]; then
        go_cmd="$(scd_find_go "$COMPOSE_GO_MIN_MINOR")"
        started="$(scd_now)"
        scd_log "building docker compose $COMPOSE_VERSION with $go_cmd (about 3 minutes on 2 cores)"
        # `go install module@version` refuses compose (its go.mod has exclude directives): build
        # inside a writable copy of the module instead.
        dir="$("$go_cmd" mod download -json "$COMPOSE_MODULE@$COMPOSE_VERSION" \
            | python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')" \
            || scd_die "downloading $COMPOSE_MODULE@$COMPOSE_VERSION from the Go module proxy failed"
        src="$DOCKER_STATE_DIR/compose-src"
        rm -rf "$src"
        cp -r "$dir" "$src"
        chmod -R u+w "$src"
        if ! (cd "$src" && GOTOOLCHAIN=local GOFLAGS=-mod=mod "$go_cmd" build -trimpath \
            -ldflags "-w -s -X $COMPOSE_MODULE/internal.Version=$COMPOSE_VERSION" \
            -o "$COMPOSE_CACHE.tmp" ./cmd) >"$log" 2>&1; then
            scd_tail_log "$log"
            scd_die "building docker compose failed"
        fi
        mv "$COMPOSE_CACHE.tmp" "$COMPOSE_CACHE"
        rm -rf "$src"
        scd_log "built docker compose in $(scd_elapsed "$started")s"
    fi
    install -m 0755 "$COMPOSE_CACHE" "$CLI_PLUGINS_DIR/docker-compose"
    compose_answers || scd_die "docker compose does not answer after installing $CLI_PLUGINS_DIR/docker-compose"
    scd_log "docker compose $COMPOSE_VERSION installed in $CLI_PLUGINS_DIR"
}

cmd_install() {
    install_engine
    install_compose
}

dockerd_ours() { scd_pid_alive "$DOCKERD_PIDFILE" dockerd; }

cmd_start() {
    local started
    if engine_answers; then
        return 0
    fi
    command -v dockerd >/dev/null || scd_die "dockerd not found (run: deploy/docker.sh install)"
    ((EUID == 0)) || scd_die "starting dockerd needs root"
    started="$(scd_now)"
    scd_launch "$DOCKERD_PIDFILE" "$DOCKERD_LOG" dockerd dockerd
    if ! scd_wait_ready dockerd "$(<"$DOCKERD_PIDFILE")" "$DOCKERD_START_TIMEOUT_S" "$DOCKERD_LOG" \
        engine_answers; then
        scd_stop dockerd "$DOCKERD_PIDFILE" dockerd "$DOCKERD_STOP_TIMEOUT_S"
        scd_die "dockerd did not start"
    fi
    scd_log "dockerd answers (started in $(scd_elapsed "$started")s, log $DOCKERD_LOG)"
}

cmd_stop() {
    if ! dockerd_ours; then
        rm -f "$DOCKERD_PIDFILE"
        scd_log "dockerd was not started by this script: left as it is"
        return 0
    fi
    scd_stop dockerd "$DOCKERD_PIDFILE" dockerd "$DOCKERD_STOP_TIMEOUT_S"
}

cmd_status() {
    local rc=0
    if engine_answers; then
        echo "engine: $(docker version --format '{{.Server.Version}}')$(dockerd_ours && echo ' (started by deploy/docker.sh)')"
    else
        echo "engine: not answering"
        rc=3
    fi
    if compose_answers; then
        echo "compose: $(docker compose version --short)"
    else
        echo "compose: missing"
        rc=3
    fi
    return "$rc"
}

# base_tag: scd-base:<hash of the package list and of the recipe below>.
base_tag() {
    local recipe
    recipe="$(declare -f build_base)"
    echo "$BASE_REPO:$(printf '%s\n%s\n%s\n' "$DEBIAN_SUITE" "$recipe" "$(<"$BASE_PACKAGES")" \
        | sha256sum | cut -c1-12)"
}

# build_base TAG (in a subshell: it dies on the first failure): debootstrap a minimal root, add the packages, strip what a container never
# reads, import it as TAG.
build_base() {
    local tag="$1" root packages
    command -v debootstrap >/dev/null || scd_die "debootstrap not found (apt-get install debootstrap)"
    ((EUID == 0)) || scd_die "building the base image needs root (debootstrap, chroot)"
    mapfile -t packages < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$BASE_PACKAGES")
    root="$(mktemp -d "$DOCKER_STATE_DIR/base-root.XXXXXX")"
    # The .debs are kept between builds: a rebuild downloads only what changed.
    mkdir -p "$DOCKER_STATE_DIR/debs"
    debootstrap --variant=minbase --cache-dir="$DOCKER_STATE_DIR/debs" \
        "$DEBIAN_SUITE" "$root" "$DEBIAN_MIRROR" || scd_die "debootstrap failed"
    cat >"$root/etc/apt/sources.list" <<EOF
deb $DEBIAN_MIRROR $DEBIAN_SUITE main
deb $DEBIAN_MIRROR $DEBIAN_SUITE-updates main
deb ${DEBIAN_MIRROR%/debian}/debian-security $DEBIAN_SUITE-security main
EOF
    # Package scripts (the JRE's) need /proc; nothing may start services in the chroot.
    mount -t proc proc "$root/proc"
    printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
    chmod +x "$root/usr/sbin/policy-rc.d"
    if ! chroot "$root" sh -c "apt-get update -q && apt-get upgrade -y -q \
        && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends ${packages[*]}"; then
        umount "$root/proc"
        rm -rf "$root"
        scd_die "installing the base packages failed"
    fi
    umount "$root/proc"
    chroot "$root" apt-get clean
    rm -rf "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* "$root"/usr/share/man/* \
        "$root"/usr/share/info/* "$root"/var/log/*.log "$root"/var/cache/debconf/*-old \
        "$root/usr/sbin/policy-rc.d"
    # apt inside image builds keeps its downloads (they use a cache mount for them).
    echo 'Binary::apt::APT::Keep-Downloaded-Packages "true";' >"$root/etc/apt/apt.conf.d/keep-cache"
    tar -C "$root" -c . | docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' \
        --change 'CMD ["/bin/bash"]' - "$tag" >/dev/null || scd_die "docker import failed"
    rm -rf "$root"
}

cmd_base() {
    local tag started
    tag="$(base_tag)"
    if ! docker image inspect "$tag" >/dev/null 2>&1; then
        started="$(scd_now)"
        scd_log "building $tag: Debian $DEBIAN_SUITE from $DEBIAN_MIRROR with $(grep -cv '^\s*\(#\|$\)' "$BASE_PACKAGES") package(s)"
        mkdir -p "$DOCKER_STATE_DIR" "$SCD_HOME/logs"
        (build_base "$tag") >"$SCD_HOME/logs/base-image.log" 2>&1 \
            || { scd_tail_log "$SCD_HOME/logs/base-image.log"; scd_die "building $tag failed"; }
        scd_log "built $tag ($(docker image inspect --format '{{.Size}}' "$tag" \
            | awk '{ printf "%.0f MB", $1 / 1e6 }')) in $(scd_elapsed "$started")s"
    fi
    docker tag "$tag" "$BASE_ALIAS"
    echo "$tag"
}

case "${1:-}" in
    install) scd_lock docker; cmd_install ;;
    start) scd_lock docker; cmd_start ;;
    stop) scd_lock docker; cmd_stop ;;
    status) cmd_status ;;
    base) scd_lock docker-base; cmd_base ;;
    *) echo "usage: $0 install|start|stop|status|base" >&2; exit 2 ;;
esac
