#!/usr/bin/env bash
# Builds one of this folder's Maven projects (the JVM side of a compatibility test) and prints
# the Java classpath that runs it: tests/compat/build.sh <project-dir>. Built once per content
# of the project's pom.xml and src/, into $SCD_HOME/build/<project>/<fingerprint>: later runs
# only print the classpath. Maven resolves offline first (~/.m2), online only when something is
# missing.
set -euo pipefail
# shellcheck source=deploy/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../deploy/common.sh"
[[ $# -eq 1 && -f "$1/pom.xml" ]] || scd_die "usage: $0 <project-dir with a pom.xml>"
project="$(cd "$1" && pwd)"
name="$(basename "$project")"

fingerprint="$(cd "$project" && find pom.xml src -type f | LC_ALL=C sort | xargs sha256sum \
    | sha256sum | cut -c1-16)"
out="$SCD_HOME/build/$name/$fingerprint"
if [[ ! -f "$out/classpath.txt" ]]; then
    scd_lock "$name"
fi
if [[ ! -f "$out/classpath.txt" ]]; then
    command -v mvn >/dev/null || scd_die "mvn not found"
    log="$SCD_HOME/logs/$name-build.log"
    mkdir -p "$(dirname "$log")"
    build="$out.tmp"
    rm -rf "$build"
    args=(-B -q -f "$project/pom.xml" -Dbuild.dir="$build" compile dependency:build-classpath
        -Dmdep.outputFile="$build/dependencies.txt")
    started="$(scd_now)"
    if ! mvn -o "${args[@]}" >"$log" 2>&1; then
        scd_log "offline build failed; resolving from Maven Central"
        if ! mvn "${args[@]}" >>"$log" 2>&1; then
            scd_tail_log "$log"
            scd_die "building $project failed"
        fi
    fi
    echo "$out/classes:$(<"$build/dependencies.txt")" >"$build/classpath.txt"
    rm -rf "$out"
    mv "$build" "$out"
    scd_log "built $project in $(scd_elapsed "$started")s"
fi
cat "$out/classpath.txt"
