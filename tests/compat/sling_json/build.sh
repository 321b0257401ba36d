#!/usr/bin/env bash
# Builds Sling's side of tests/compat/test_sling_json.py (this folder's Maven project) and
# prints the Java classpath that runs it (io.scd.compat.SlingJson). Built once per content of
# pom.xml and src/, into $SCD_HOME/build/sling-json/<fingerprint>: later runs only print the
# classpath. Maven resolves offline first (~/.m2), online only when something is missing.
set -euo pipefail
# shellcheck source=deploy/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../../deploy/common.sh"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

fingerprint="$(cd "$HERE" && find pom.xml src -type f | LC_ALL=C sort | xargs sha256sum \
    | sha256sum | cut -c1-16)"
out="$SCD_HOME/build/sling-json/$fingerprint"
if [[ ! -f "$out/classpath.txt" ]]; then
    scd_lock sling-json
fi
if [[ ! -f "$out/classpath.txt" ]]; then
    command -v mvn >/dev/null || scd_die "mvn not found"
    log="$SCD_HOME/logs/sling-json-build.log"
    mkdir -p "$(dirname "$log")"
    build="$out.tmp"
    rm -rf "$build"
    args=(-B -q -f "$HERE/pom.xml" -Dbuild.dir="$build" compile dependency:build-classpath
        -Dmdep.outputFile="$build/dependencies.txt")
    started="$(scd_now)"
    if ! mvn -o "${args[@]}" >"$log" 2>&1; then
        scd_log "offline build failed; resolving from Maven Central"
        if ! mvn "${args[@]}" >>"$log" 2>&1; then
            scd_tail_log "$log"
            scd_die "building $HERE failed"
        fi
    fi
    echo "$out/classes:$(<"$build/dependencies.txt")" >"$build/classpath.txt"
    rm -rf "$out"
    mv "$build" "$out"
    scd_log "built $HERE in $(scd_elapsed "$started")s"
fi
cat "$out/classpath.txt"
