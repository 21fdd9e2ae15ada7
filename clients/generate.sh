#!/usr/bin/env bash
# Regenerates the API clients from the server's OpenAPI document:
#   clients/openapi.json   the document (`memgpt serve --openapi`)
#   clients/python/        openapi-python-client (package `memgpt_rs_client`)
#   clients/typescript/    openapi-typescript types (src/schema.d.ts) for openapi-fetch
# Needs the tools of .ci/python-api.sh (its bin folder on PATH, or MEMGPT_TEST_API_TOOLS) and
# npm. The contract test (tests/integration/contract.rs) fails when the checked-in document is
# not the server's.
set -euo pipefail
cd "$(dirname "$0")"
TOOLS="${MEMGPT_TEST_API_TOOLS:-$(../.ci/python-api.sh)}"
export PATH="$TOOLS:$PATH"

cargo run --quiet --features server --bin memgpt -- serve --openapi > openapi.json

# `--meta uv`: the package builds with uv_build, which writes nothing into clients/python
# (setuptools' setup.py wrote build/ and *.egg-info there on every `pip install`).
openapi-python-client generate --path openapi.json --output-path python --meta uv \
    --overwrite --config python-generator.yaml

cd typescript
npm ci --no-audit --no-fund
npm run generate
