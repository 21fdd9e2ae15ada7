#!/usr/bin/env bash
# Installs the Python tools of the API contract tests into a virtualenv from PyPI:
# schemathesis (property-based API testing), openapi-spec-validator, openapi-python-client (the
# generator of clients/python, with ruff to format it), and the official `openai` SDK (run
# against the OpenAI-compatible facade). Idempotent: the virtualenv in $MEMGPT_CI_CACHE (default
# /var/cache/memgpt-ci, outside the repository) is kept while its marker names these versions.
# Prints the virtualenv's bin folder (for MEMGPT_TEST_API_TOOLS) on stdout.
set -euo pipefail

PACKAGES=(schemathesis==4.32.5 openapi-spec-validator==0.9.0 openapi-python-client==0.29.1 ruff==0.17.6 openai==3.63.0)
CACHE="${MEMGPT_CI_CACHE:-/var/cache/memgpt-ci}"
VENV="$CACHE/python-api"
log() { echo "[python-api.sh] $*" >&2; }

if [ "$(cat "$VENV/.installed" 2>/dev/null)" != "${PACKAGES[*]}" ]; then
    log "installing ${PACKAGES[*]} into $VENV"
    rm -rf "$VENV"
    python3 -m venv "$VENV" >&2
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "${PACKAGES[@]}" >&2
    echo "${PACKAGES[*]}" > "$VENV/.installed"
fi
"$VENV/bin/schemathesis" --version >&2
echo "$VENV/bin"
