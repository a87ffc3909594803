#!/usr/bin/env bash
# Continuous batching against the reference: aggregate decode throughput with 1, 2, 4 and 8
# sequences sharing each step (bench_batch; the cpu platform batches its instances this way)
# beside llama-batched-bench's S_TG on the same file, the two interleaved run by run so a
# loaded machine slows both alike; prints the medians and ours / reference per stream count.
#   scripts/bench-batching.sh BUILD_DIR MODEL
# Environment: BENCH_THREADS (the largest count is used; default 2), BENCH_RUNS (3),
# BATCH_REFERENCE_BIN (directory holding llama-batched-bench; default REFERENCE_BIN, else
# ~/.cache/llamapi-reference/llama.cpp/build/bin), BATCH_KEEP (a path prefix: the raw outputs
# are kept as PREFIX.ours and PREFIX.ref). Run by run-bench.sh; runs alone too.
set -euo pipefail
build=${1:?build dir}
model=${2:?model file}
thread_counts=${BENCH_THREADS:-2}
threads=${thread_counts##* }
runs=${BENCH_RUNS:-3}
ref_bin=${BATCH_REFERENCE_BIN:-${REFERENCE_BIN:-$HOME/.cache/llamapi-reference/llama.cpp/build/bin}}
n_gen=32
ours=$(mktemp) ref=$(mktemp)
trap 'rm -f "$ours" "$ref"' EXIT

have_ref=0
[[ -x $ref_bin/llama-batched-bench ]] && have_ref=1
echo "== continuous batching, $threads threads, $runs interleaved runs (median), $(basename "$model")"
echo "   ours: $("$build/bench/bench_engine" --isa 2>/dev/null || echo '?') kernels;" \
     "reference: $( ((have_ref)) && echo "$ref_bin/llama-batched-bench" || echo "none in $ref_bin")"
for ((r = 0; r < runs; r++)); do
    "$build/bench/bench_batch" -t "$threads" -r 1 -n "$n_gen" "$model" >>"$ours"
    ((have_ref)) || continue
    rc=0
    "$ref_bin/llama-batched-bench" -m "$model" -t "$threads" -c 2048 -b 512 -ub 512 -npp 16 \
        -ntg "$n_gen" -npl 1,2,4,8 >"$ref.run" 2>&1 || rc=$?
    if ((rc != 0)); then
        echo "   reference run $((r + 1)) failed (exit $rc$( ((rc > 128)) && echo ", signal $((rc - 128))"))"
        continue
    fi
    grep -E '^\|' "$ref.run" >>"$ref" || true
done
rm -f "$ref.run"
[[ -n ${BATCH_KEEP:-} ]] && cp "$ours" "$BATCH_KEEP.ours" && cp "$ref" "$BATCH_KEEP.ref"
# ours: "NAME streams N  X tok/s ..."; reference rows: | PP | TG | B | N_KV | T_PP | S_PP |
# T_TG | S_TG | T | S |
awk -v refs="$ref" '
    function median(list,   a, n, i, j, t) {
        n = split(list, a, " ")
        for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) {
            t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
        return n ? a[int((n + 1) / 2)] : 0 }
    BEGIN {
        while ((getline line < refs) > 0) {
            split(line, f, "|"); b = f[4] + 0; s = f[9] + 0
            if (b > 0 && s > 0) r[b] = r[b] " " s }
    }
    { for (i = 1; i < NF; i++) if ($i == "streams") o[$(i + 1) + 0] = o[$(i + 1) + 0] " " $(i + 2) }
    END {
        printf "   %-8s %12s %14s %8s\n", "streams", "ours tok/s", "ref S_TG t/s", "ratio"
        for (n = 1; n <= 8; n *= 2) {
            mo = median(o[n]); mr = (n in r) ? median(r[n]) : 0
            rs = mr > 0 ? sprintf("%.2f", mr) : "-"
            ratio = mr > 0 ? sprintf("%.2fx", mo / mr) : "-"
            printf "   %-8d %12.2f %14s %8s\n", n, mo, rs, ratio }
    }' "$ours"
