#!/usr/bin/env bash
# The test command of scd:  bash deploy/test.sh [pytest arguments]
#
# Creates .venv with Python 3.11 when missing, installs the project with its test extras
# (again only when pyproject.toml changed), then runs pytest from the repository root.
# Integration tests get Kafka and S3 from tests/conftest.py: the servers named by the
# SCD_TEST_* variables (see deploy/services.sh env), else testcontainers when Docker answers,
# else the native servers of deploy/, started for the run.
#
# The exit code is pytest's, except "no tests collected" (5), which is reported as a failure (1).
set -euo pipefail
# shellcheck source=deploy/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$SCD_REPO_DIR"

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

fingerprint="$(sha256sum pyproject.toml | cut -c1-16)"
if [[ ! -f "$STAMP" || "$(<"$STAMP")" != "$fingerprint" ]]; then
    started="$(scd_now)"
    scd_log "installing scd and its test dependencies into $VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e '.[test]'
    echo "$fingerprint" >"$STAMP"
    scd_log "installed in $(scd_elapsed "$started")s"
fi

rc=0
"$VENV/bin/python" -m pytest "$@" || rc=$?
if ((rc == 5)); then
    scd_log "pytest collected no tests: treating that as a failure"
    exit 1
fi
exit "$rc"
