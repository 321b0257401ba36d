#!/usr/bin/env bash
# The static checks of scd:  bash deploy/lint.sh
#
# ruff (lint rules and formatting) and mypy strict over the Python code, shellcheck over the
# shell scripts, as configured in pyproject.toml. .ci/run runs it before the tests; it needs
# no services. Creates or updates .venv like deploy/test.sh. Exits non-zero when any check
# fails, after running all of them.
set -euo pipefail
# shellcheck source=deploy/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$SCD_REPO_DIR"

scd_ensure_venv

PYTHON_CODE=(runtime journal blobstore publisher subscriber scd bench tests proto)
failed=()
"$VENV/bin/ruff" check "${PYTHON_CODE[@]}" || failed+=("ruff check")
"$VENV/bin/ruff" format --check "${PYTHON_CODE[@]}" || failed+=("ruff format")
"$VENV/bin/mypy" "${PYTHON_CODE[@]}" || failed+=(mypy)
"$VENV/bin/shellcheck" --external-sources deploy/*.sh .ci/run || failed+=(shellcheck)
if ((${#failed[@]} > 0)); then
    scd_log "failed: ${failed[*]}"
    exit 1
fi
scd_log "ruff, mypy and shellcheck: clean"
