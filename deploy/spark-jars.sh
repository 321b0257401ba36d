#!/usr/bin/env bash
# Fetches the jars local PySpark sessions need beyond what pyspark ships:
#
#   deploy/spark-jars.sh          Delta Lake and scd's own jar (subscriber/jvm, built with Maven)
#                                             -> $SCD_HOME/jars/delta/, list in $SCD_HOME/jars/delta.txt
#   deploy/spark-jars.sh --s3a    also s3a    -> $SCD_HOME/jars/s3a/,   list in $SCD_HOME/jars/s3a.txt
#   deploy/spark-jars.sh --kafka  also Spark's Kafka source (benchmark baseline)
#                                             -> $SCD_HOME/jars/kafka/, list in $SCD_HOME/jars/kafka.txt
#   deploy/spark-jars.sh --fingerprint SET   what SET's jars are made from, as a short hash
#
# Each list file holds one absolute jar path per line; join them with commas for spark.jars.
# The paths of the list files are printed on stdout. Does nothing when the jars are present.
set -euo pipefail
# shellcheck source=deploy/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

JARS_DIR="$SCD_HOME/jars"
SPARK_POM="$SCD_DEPLOY_DIR/spark/pom.xml"
OWN_JAR_DIR="$SCD_REPO_DIR/subscriber/jvm"

# fingerprint SET: what the jars of SET are made from (the pom; for 'delta' also scd's sources),
# by content alone: every checkout of the same sources shares $SCD_HOME's jars. (With the pom's
# path in it, a second checkout rebuilt scd's jar under the JVMs of the first, which then
# failed to load its classes and to map their class archive.)
fingerprint() {
    {
        sha256sum <"$SPARK_POM"
        if [[ "$1" == delta ]]; then
            (cd "$OWN_JAR_DIR" && find pom.xml src -type f | LC_ALL=C sort | xargs sha256sum)
        fi
    } | sha256sum | cut -c1-16
}

# build_own_jar DIR: scd's own jar (subscriber/jvm) into DIR.
build_own_jar() {
    local build="$SCD_HOME/build/jvm" log="$SCD_HOME/logs/spark-jars-own.log"
    rm -rf "$build"
    if ! mvn -B -f "$OWN_JAR_DIR/pom.xml" -Dbuild.dir="$build" package >"$log" 2>&1; then
        scd_tail_log "$log"
        scd_die "building $OWN_JAR_DIR failed"
    fi
    cp "$build"/scd-hadoop-localfs-*.jar "$1/"
}

# fetch SET: copies the jars of pom profile SET into $JARS_DIR/SET and writes $JARS_DIR/SET.txt.
fetch() {
    local set="$1" dir="$JARS_DIR/$1" list="$JARS_DIR/$1.txt" marker="$JARS_DIR/.$1.installed"
    local fingerprint started
    fingerprint="$(fingerprint "$set")"
    if [[ -f "$marker" && -f "$list" && "$(<"$marker")" == "$fingerprint" ]]; then
        echo "$list"
        return 0
    fi
    started="$(scd_now)"
    scd_log "fetching the '$set' jars into $dir"
    scd_fetch_jars "$SPARK_POM" "$dir" "$SCD_HOME/logs/spark-jars-$set.log" -P "$set"
    [[ "$set" != delta ]] || build_own_jar "$dir"
    find "$dir" -maxdepth 1 -name '*.jar' | sort >"$list"
    [[ -s "$list" ]] || scd_die "no jars were fetched into $dir"
    echo "$fingerprint" >"$marker"
    scd_log "fetched $(wc -l <"$list") '$set' jar(s), $(du -sh "$dir" | cut -f1)," \
        "in $(scd_elapsed "$started")s"
    echo "$list"
}

scd_lock spark-jars
case "${1:-}" in
    "") fetch delta ;;
    --s3a) fetch delta; fetch s3a ;;
    --kafka) fetch delta; fetch kafka ;;
    --fingerprint) fingerprint "${2:?usage: $0 --fingerprint SET}" ;;
    *) echo "usage: $0 [--s3a | --kafka | --fingerprint SET]" >&2; exit 2 ;;
esac
