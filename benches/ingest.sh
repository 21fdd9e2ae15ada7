#!/usr/bin/env bash
# Ingest throughput and peak memory of `memgpt ingest` (release build) on about a million tokens
# of Wikipedia prose (the NaturalQuestions-Open gold passages in ../shared/data, three passes),
# once without embeddings (text search only) and once with the local MiniLM embedder (passages
# then also fit the embedder's window, so that run has more chunks).
#
#   benches/ingest.sh [MEMGPT_HOME]     (default: $MEMGPT_HOME, where the local models are)
#
# Prints one line per run; BENCHMARKS.md records them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
data="$root/../shared/data/nq_open/nq-open-oracle.jsonl.gz"
if [[ ! -f "$data" ]]; then
    echo "SKIPPED: $data is missing"
    exit 0
fi
home=${1:-${MEMGPT_HOME:-$HOME/.memgpt}}
(cd "$root" && cargo build --release --features cli --bin memgpt)
bin="$root/target/release/memgpt"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$data" "$work/wiki.md" <<'PY'
import gzip, json, sys
source, target = sys.argv[1], sys.argv[2]
passages = [c for line in gzip.open(source, "rt") for c in json.loads(line)["ctxs"]]
with open(target, "w") as out:
    for round in range(3):
        for p in passages:
            out.write(f"## {p['title']} ({round + 1})\n\n{p['text']}\n\n")
PY
cd "$work"
echo "input: $(wc -c < wiki.md) bytes"
export MEMGPT_BASE_URL=http://127.0.0.1:9/v1 NO_COLOR=1 MEMGPT_HOME="$home"
for embedder in none local; do
    rm -rf memgpt-data
    echo /exit | MEMGPT_EMBEDDER=$embedder "$bin" chat --agent bench > /dev/null
    /usr/bin/time -f "peak RSS %M KB, %e s wall" -o time.txt \
        env MEMGPT_EMBEDDER=$embedder "$bin" ingest --agent bench wiki.md | tail -1
    echo "embedder=$embedder: $(cat time.txt)"
done
