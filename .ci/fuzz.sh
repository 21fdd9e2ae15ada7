#!/usr/bin/env bash
# Builds and runs the libFuzzer targets in fuzz/ the way `cargo fuzz build --dev --sanitizer none`
# and `cargo fuzz run` do, without cargo-fuzz itself: a fresh CI machine would otherwise compile
# cargo-fuzz (minutes on 2 cores) only to set these flags. The flags are cargo-fuzz 0.13's for
# that mode (coverage instrumentation that guides libFuzzer, `cfg(fuzzing)`, debug assertions;
# no sanitizer: the targets are safe Rust). Developers keep using `cargo fuzz` (RELIABILITY.md).
#
#   .ci/fuzz.sh build            build every target once (nightly toolchain)
#   .ci/fuzz.sh run SECONDS      run every target for SECONDS from the checked-in seeds
set -euo pipefail

cd "$(dirname "$0")/../fuzz"

host="$(rustc +nightly -vV | sed -n 's/^host: //p')"
targets=(fuzz_targets/*.rs)
targets=("${targets[@]##*/}")
targets=("${targets[@]%.rs}")

case "${1:-}" in
build)
    RUSTFLAGS="-Cpasses=sancov-module \
-Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
-Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares \
--cfg fuzzing \
-Cllvm-args=-simplifycfg-branch-fold-threshold=0 \
-Cllvm-args=-sanitizer-coverage-stack-depth \
-Cdebug-assertions ${RUSTFLAGS:-}" \
        cargo +nightly build --target "$host" --bins
    ;;
run)
    seconds="${2:?usage: fuzz.sh run SECONDS}"
    target_dir="$(cargo +nightly metadata --format-version 1 --no-deps \
        | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
    for target in "${targets[@]}"; do
        echo "--- ${target} (${seconds} s)"
        mkdir -p "corpus/${target}" "artifacts/${target}"
        "${target_dir}/${host}/debug/${target}" -artifact_prefix="artifacts/${target}/" \
            -max_total_time="${seconds}" "corpus/${target}" "seeds/${target}"
    done
    ;;
*)
    echo "usage: $0 build | run SECONDS" >&2
    exit 2
    ;;
esac
