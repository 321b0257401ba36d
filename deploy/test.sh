#!/usr/bin/env bash
# The test command of scd:  bash deploy/test.sh [pytest arguments]
#
# Creates .venv with Python 3.11 when missing, installs the project with its test extras
# (again only when pyproject.toml changed), then runs pytest from the repository root.
# Integration tests get Kafka and S3 from tests/conftest.py: the servers named by the
# SCD_TEST_* variables (see deploy/services.sh env), else testcontainers when Docker answers and
# holds the images deploy/images builds (nothing is pulled), else the native servers of deploy/,
# started for the run.
#
# The exit code is pytest's, except "no tests collected" (5), which is reported as a failure (1).
set -euo pipefail
# shellcheck source=deploy/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$SCD_REPO_DIR"

scd_ensure_venv

rc=0
"$VENV/bin/python" -m pytest "$@" || rc=$?
if ((rc == 5)); then
    scd_log "pytest collected no tests: treating that as a failure"
    exit 1
fi
exit "$rc"
