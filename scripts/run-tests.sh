#!/usr/bin/env bash
# Runs every unit test binary (from the first build dir) and the e2e suite (against the
# server in the second build dir; again against LLAMAPI_E2E_ASAN_DIR's when set), then prints
# one summary line "N passed, N failed".
#   scripts/run-tests.sh [--unit-only|--e2e-only] UNIT_BUILD_DIR E2E_BUILD_DIR
set -uo pipefail
cd "$(dirname "$0")/.."

mode=all
case "${1:-}" in --unit-only|--e2e-only) mode=${1#--}; shift ;; esac
unit_dir=${1:?unit build dir}
e2e_dir=${2:?e2e build dir}

passed=0 failed=0 skipped=0
failures=()
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LLAMAPI_BUILD_DIR=$unit_dir
# Every unit test binary has a deadline: one that hangs fails with its name and the run goes on.
UNIT_TIMEOUT_S=${LLAMAPI_UNIT_TIMEOUT:-900}

count() { # $1 = log file; adds cmocka's counts
    local p f s
    p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$1" | tail -1)
    f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$1" | tail -1)
    # cmocka's summary: "[  SKIPPED ] N test(s), listed below:" (PASSED excludes them).
    s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$1" | tail -1)
    passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0})); skipped=$((skipped + ${s:-0}))
}

if [[ $mode != e2e-only ]]; then
    mkdir -p "$unit_dir/logs"
    for t in "$unit_dir"/tests/test_*; do
        [[ -x $t ]] || continue
        name=$(basename "$t")
        log="$unit_dir/logs/$name.log"
        if timeout --kill-after=10 "$UNIT_TIMEOUT_S" "$t" >"$log" 2>&1; then rc=0; else rc=$?; fi
        count "$log"
        if ((rc == 124 || rc == 137)); then
            failures+=("$name (timed out after ${UNIT_TIMEOUT_S} s)"); failed=$((failed + 1))
            echo "--- $name timed out after ${UNIT_TIMEOUT_S} s; its last lines:"; tail -20 "$log"
        elif ((rc != 0)); then
            failures+=("$name")
            grep -q '^\[  FAILED  \]' "$log" || failed=$((failed + 1))
            echo "--- $name failed (exit $rc):"; tail -40 "$log"
        else
            echo "ok   $name"
        fi
        grep -h '^skip:' "$log" || true
    done
fi

# The threaded tests again under ThreadSanitizer, when built.
if [[ $mode == all && -n ${LLAMAPI_TSAN_DIR:-} ]]; then
    export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
    for t in "$LLAMAPI_TSAN_DIR"/tests/test_*; do
        [[ -x $t ]] || continue
        name="tsan/$(basename "$t")"
        log="$LLAMAPI_TSAN_DIR/logs/$(basename "$t").log"
        mkdir -p "$(dirname "$log")"
        if timeout --kill-after=10 "$UNIT_TIMEOUT_S" "$t" >"$log" 2>&1; then rc=0; else rc=$?; fi
        count "$log"
        if ((rc == 124 || rc == 137)); then
            failures+=("$name (timed out after ${UNIT_TIMEOUT_S} s)"); failed=$((failed + 1))
            echo "--- $name timed out after ${UNIT_TIMEOUT_S} s"
        elif ((rc != 0)); then
            failures+=("$name"); grep -q '^\[  FAILED  \]' "$log" || failed=$((failed + 1))
            echo "--- $name failed (exit $rc):"; grep -A30 -m1 'WARNING: ThreadSanitizer\|FAILED' "$log" | head -40
        else
            echo "ok   $name"
        fi
    done
fi

# Each fuzzer for a short budget, when built.
if [[ $mode == all && -n ${LLAMAPI_FUZZ_DIR:-} ]]; then
    if FUZZ_RUNS=${LLAMAPI_FUZZ_RUNS:-30000} timeout --kill-after=10 1200 scripts/run-fuzz.sh "$LLAMAPI_FUZZ_DIR" 10 \
        >"$LLAMAPI_FUZZ_DIR/run.log" 2>&1; then
        grep '^ok' "$LLAMAPI_FUZZ_DIR/run.log"
    else
        failures+=("fuzz"); cat "$LLAMAPI_FUZZ_DIR/run.log"
    fi
    p=$(sed -n 's/^fuzz: \([0-9]*\) passed.*/\1/p' "$LLAMAPI_FUZZ_DIR/run.log")
    f=$(sed -n 's/^fuzz: [0-9]* passed, \([0-9]*\) failed/\1/p' "$LLAMAPI_FUZZ_DIR/run.log")
    passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0}))
fi

# The aarch64 build under qemu-user (unit tests on two CPU models, a server smoke test), when built.
if [[ $mode == all && -n ${LLAMAPI_AARCH64_DIR:-} ]]; then
    mkdir -p "$LLAMAPI_AARCH64_DIR/logs"
    if scripts/test-aarch64.sh "$LLAMAPI_AARCH64_DIR" >"$LLAMAPI_AARCH64_DIR/logs/run.log" 2>&1; then
        grep '^ok\|^     ' "$LLAMAPI_AARCH64_DIR/logs/run.log"
    else
        failures+=("aarch64"); cat "$LLAMAPI_AARCH64_DIR/logs/run.log"
    fi
    p=$(sed -n 's/^aarch64: \([0-9]*\) passed.*/\1/p' "$LLAMAPI_AARCH64_DIR/logs/run.log")
    f=$(sed -n 's/^aarch64: [0-9]* passed, \([0-9]*\) failed.*/\1/p' "$LLAMAPI_AARCH64_DIR/logs/run.log")
    s=$(sed -n 's/^aarch64: .* failed, \([0-9]*\) skipped/\1/p' "$LLAMAPI_AARCH64_DIR/logs/run.log")
    passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0})); skipped=$((skipped + ${s:-0}))
fi

# The e2e suite against the server in dir $1 (label $2), one file at a time so that each file
# has its own deadline: a test that waits forever fails with its name (--test-timeout), a file
# that outlives its deadline is killed and counted as one failure, and the run goes on. A
# sanitizer build also sets LLAMAPI_E2E_SANITIZER so every server must exit cleanly with no
# report.
E2E_TEST_TIMEOUT_S=${LLAMAPI_E2E_TEST_TIMEOUT:-300}
E2E_FILE_TIMEOUT_S=${LLAMAPI_E2E_FILE_TIMEOUT:-1200}
run_e2e() {
    local dir=$1 label=$2 file name log rc p f s fp=0 ff=0 fs=0 t0
    export LLAMAPI_SERVER_BIN=$PWD/$dir/bin/llamapi-server
    export LLAMAPI_CLI_BIN=$PWD/$dir/bin/llamapi
    export LLAMAPI_TOOLS_DIR=$PWD/$dir/bin
    mkdir -p "$dir/logs/e2e"
    # LLAMAPI_E2E_FILES: a space-separated subset by name ("hostile service"); all by default.
    local files=(tests/e2e/*.test.mjs)
    [[ -n ${LLAMAPI_E2E_FILES:-} ]] && files=($(printf 'tests/e2e/%s.test.mjs ' $LLAMAPI_E2E_FILES))
    for file in "${files[@]}"; do
        name=$(basename "$file" .test.mjs)
        log="$dir/logs/e2e/$name.log"
        t0=$SECONDS
        (cd tests/e2e && exec timeout --kill-after=20 "$E2E_FILE_TIMEOUT_S" node --test --test-concurrency=1 \
            --test-timeout=$((E2E_TEST_TIMEOUT_S * 1000)) --test-force-exit --test-reporter=tap \
            "$(basename "$file")") >"$log" 2>&1
        rc=$?
        p=$(sed -n 's/^# pass \([0-9]*\)/\1/p' "$log" | tail -1)
        f=$(sed -n 's/^# fail \([0-9]*\)/\1/p' "$log" | tail -1)
        s=$(sed -n 's/^# skip \([0-9]*\)/\1/p' "$log" | tail -1)
        fp=$((fp + ${p:-0})); ff=$((ff + ${f:-0})); fs=$((fs + ${s:-0}))
        if ((rc == 124 || rc == 137)); then
            failures+=("$label/$name (timed out after ${E2E_FILE_TIMEOUT_S} s)"); ff=$((ff + 1))
            echo "--- $label/$name timed out after ${E2E_FILE_TIMEOUT_S} s; its last lines:"; tail -30 "$log"
        elif ((rc != 0)); then
            failures+=("$label/$name")
            [[ -n ${f:-} && $f != 0 ]] || ff=$((ff + 1))
            echo "--- $label/$name failed (exit $rc):"; grep -B2 -A25 '^not ok' "$log" | head -150
        else
            echo "ok   $label/$name (${p:-0} passed, ${s:-0} skipped, $((SECONDS - t0)) s)"
        fi
    done
    passed=$((passed + fp)); failed=$((failed + ff)); skipped=$((skipped + fs))
    echo "$label: $fp passed, $ff failed, $fs skipped"
}

if [[ $mode != unit-only && -f tests/e2e/package.json ]]; then
    run_e2e "$e2e_dir" e2e
    # Again against the ASan+UBSan server, when built: memory errors in request handling only
    # show there (a stream reading a freed request body answered plausibly in release).
    if [[ -n ${LLAMAPI_E2E_ASAN_DIR:-} ]]; then
        LLAMAPI_E2E_SANITIZER=asan run_e2e "$LLAMAPI_E2E_ASAN_DIR" e2e-asan
    fi
fi

((${#failures[@]})) && echo "failed: ${failures[*]}"
echo "tests: $passed passed, $failed failed, $skipped skipped"
((failed == 0 && ${#failures[@]} == 0))
