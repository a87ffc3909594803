#!/usr/bin/env bash
# Runs every libFuzzer target in BUILD_DIR/fuzz for SECONDS each, starting from its seed corpus
# in tests/fuzz/corpus/<target> (new inputs go to a scratch copy, not the repo). Prints one
# line per target and a summary "N passed, N failed".
#   scripts/run-fuzz.sh BUILD_DIR SECONDS
set -uo pipefail
cd "$(dirname "$0")/.."
dir=${1:?build dir}
seconds=${2:-30}
passed=0 failed=0
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
for f in "$dir"/fuzz/fuzz_*; do
    [[ -x $f ]] || continue
    name=$(basename "$f")
    work=$(mktemp -d)
    [[ -d tests/fuzz/corpus/$name ]] && cp -r tests/fuzz/corpus/"$name"/. "$work"/
    log="$dir/fuzz/$name.log"
    # FUZZ_RUNS set: a fixed seed and run count, so CI replays the same inputs every time (a
    # regression check, not a hunt); otherwise fuzz for SECONDS.
    budget=(-max_total_time="$seconds")
    [[ -n ${FUZZ_RUNS:-} ]] && budget=(-seed=1 -runs="$FUZZ_RUNS")
    if "$f" "${budget[@]}" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
        -artifact_prefix="$dir/fuzz/$name-" "$work" >"$log" 2>&1; then
        passed=$((passed + 1))
        echo "ok   $name ($(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | grep -o '[0-9]*$' || echo '?') runs)"
    else
        failed=$((failed + 1))
        echo "--- $name FAILED:"; grep -A30 -m1 'ERROR\|==ERROR\|runtime error' "$log" | head -40
    fi
    rm -rf "$work"
done
echo "fuzz: $passed passed, $failed failed"
((failed == 0))
