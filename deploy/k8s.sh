#!/usr/bin/env bash
# Offline checks of the Kubernetes manifests of deploy/k8s (no cluster needed):
#
#   deploy/k8s.sh validate [DIR]
#
# Builds deploy/k8s/validate (a Go program on k8s.io/api, from the Go module proxy) once per
# version of its sources into $SCD_HOME/bin, then runs it on DIR (default deploy/k8s): every
# manifest decoded strictly into the typed Kubernetes structs, and the cross-object checks its
# main.go lists. Prints its JSON summary; exits 1 when a manifest has a problem.
set -euo pipefail
# shellcheck source=deploy/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

VALIDATE_SRC="$SCD_DEPLOY_DIR/k8s/validate"
# k8s.io/api v0.37 declares `go 1.26.0` in its go.mod.
GO_MIN_MINOR=26

# validator_path: the binary for the current sources (their digest names it).
validator_path() {
    local digest
    digest="$(cat "$VALIDATE_SRC/go.mod" "$VALIDATE_SRC/go.sum" "$VALIDATE_SRC"/*.go \
        | sha256sum | cut -c1-16)"
    echo "$SCD_HOME/bin/scd-k8s-validate-$digest"
}

build() {
    local bin="$1" go_cmd started log="$SCD_HOME/logs/k8s-validate-build.log"
    local partial="$SCD_HOME/bin/.scd-k8s-validate.partial"
    [[ -x "$bin" ]] && return 0
    go_cmd="$(scd_find_go "$GO_MIN_MINOR")"
    started="$(scd_now)"
    mkdir -p "$SCD_HOME/bin" "$SCD_HOME/logs"
    scd_log "building the manifest validator with $go_cmd (about a minute the first time)"
    if ! (cd "$VALIDATE_SRC" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly "$go_cmd" build \
        -trimpath -o "$partial" .) >"$log" 2>&1; then
        scd_tail_log "$log"
        scd_die "building the manifest validator failed"
    fi
    rm -f "$SCD_HOME"/bin/scd-k8s-validate-*  # binaries of earlier sources
    mv "$partial" "$bin"
    scd_log "built the manifest validator in $(scd_elapsed "$started")s"
}

cmd_validate() {
    local bin
    bin="$(validator_path)"
    build "$bin"
    "$bin" "${1:-$SCD_DEPLOY_DIR/k8s}"
}

case "${1:-}" in
    validate) shift; cmd_validate "$@" ;;
    *) echo "usage: $0 validate [DIR]" >&2; exit 2 ;;
esac
