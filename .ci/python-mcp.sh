#!/usr/bin/env bash
# Installs the official MCP Python SDK (version 1, whose server API is FastMCP) for the test
# that attaches a FastMCP server to an agent from memgpt.toml. No virtualenv: the packages go
# to $MEMGPT_CI_CACHE/python-mcp (default /var/cache/memgpt-ci, outside the repository) with
# `pip install --target`, and the tests put that folder on PYTHONPATH.
#
# Idempotent: a marker names the installed version. Prints the folder (for
# MEMGPT_TEST_MCP_PYTHONPATH) on stdout.
set -euo pipefail

VERSION=1.30.0
CACHE="${MEMGPT_CI_CACHE:-/var/cache/memgpt-ci}"
TARGET="$CACHE/python-mcp"
log() { echo "[python-mcp.sh] $*" >&2; }

if [ "$(cat "$TARGET/.installed" 2>/dev/null)" != "mcp==$VERSION" ]; then
    log "installing mcp==$VERSION from PyPI into $TARGET"
    rm -rf "$TARGET"
    mkdir -p "$TARGET"
    python3 -m pip install --quiet --disable-pip-version-check --no-warn-conflicts --root-user-action=ignore --target "$TARGET" "mcp==$VERSION" >&2
    echo "mcp==$VERSION" > "$TARGET/.installed"
fi
PYTHONPATH="$TARGET" python3 -c "from mcp.server.fastmcp import FastMCP" \
    || { log "the FastMCP import fails from $TARGET"; exit 1; }
echo "$TARGET"
