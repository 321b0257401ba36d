#!/usr/bin/env bash
# Builds Sling's side of tests/compat/test_sling_json.py (this folder's Maven project,
# io.scd.compat.SlingJson) and prints its classpath: tests/compat/build.sh does the work.
set -euo pipefail
exec "$(dirname "${BASH_SOURCE[0]}")/../build.sh" "$(dirname "${BASH_SOURCE[0]}")"
