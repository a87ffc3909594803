#!/usr/bin/env bash
# The aarch64 build under qemu-user: the unit tests per emulated CPU model, then the server
# smoke test (scripts/smoke-server.sh). Cortex-A76 is ARMv8.2 with dotprod and FP16 but no
# i8mm (the RK3588's big cores): every unit test runs on it. "max" has every extension qemu
# knows (i8mm, SVE), so the smmla kernels run there too: it runs the tests whose results
# depend on the CPU's features (AARCH64_ISA_TESTS: kernels, engine, goldens); the others
# (parsers, API, server) would repeat the same code path at the emulator's cost. Prints one
# line per test binary and CPU with its time, then "aarch64: N passed, N failed, N skipped";
# exit status 0 when nothing failed.
#   scripts/test-aarch64.sh BUILD_DIR      (e.g. build/aarch64-release)
# QEMU_AARCH64 names the emulator; AARCH64_CPUS the CPU models ("cortex-a76 max"), the first
# of which runs every test.
set -uo pipefail
cd "$(dirname "$0")/.."
dir=${1:?aarch64 build dir}
qemu=${QEMU_AARCH64:-$(command -v qemu-aarch64-static || command -v qemu-aarch64 || true)}
[[ -n $qemu ]] || {
    echo "aarch64: qemu-aarch64(-static) not found (scripts/install-deps.sh installs it)" >&2
    exit 1
}
cpus=(${AARCH64_CPUS:-cortex-a76 max})
isa_tests=" ${AARCH64_ISA_TESTS:-test_quants test_ops test_matmul test_model test_model_golden test_cpu_model test_cpu_embed test_bert test_threadpool} "
# Libraries come from the multiarch arm64 packages under /; the sanitizer runtimes read their
# options as on the host.
export QEMU_LD_PREFIX=${QEMU_LD_PREFIX:-/}
export LLAMAPI_EMULATED=1 # timing bounds of native runs do not apply
export LLAMAPI_BUILD_DIR=$dir # where tests find the fake vendor runtimes
# An ASan+UBSan build (make ARCH=aarch64 BUILD=asan) runs too, with two differences: the
# sanitizer runtimes of the cross compiler live in /usr/aarch64-linux-gnu/lib, and
# LeakSanitizer cannot stop the threads of an emulated process (it reports a fatal error), so
# leaks are left to the x86 ASan run of the same code.
qemu_env=()
[[ $dir == *asan* ]] && qemu_env=(-E LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# Each emulated test binary has a deadline, so one that hangs fails with its name.
unit_timeout=${LLAMAPI_UNIT_TIMEOUT:-1200}
passed=0 failed=0 skipped=0
failures=()
count() {
    local p f s
    p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$1" | tail -1)
    f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$1" | tail -1)
    s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$1" | tail -1)
    passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0})); skipped=$((skipped + ${s:-0}))
}

for cpu in "${cpus[@]}"; do
    mkdir -p "$dir/logs/$cpu"
    start=$SECONDS
    for t in "$dir"/tests/test_*; do
        [[ -x $t ]] || continue
        name=$(basename "$t")
        [[ $cpu == "${cpus[0]}" || $isa_tests == *" $name "* ]] || continue
        log="$dir/logs/$cpu/$name.log"
        t0=$SECONDS
        if timeout --kill-after=10 "$unit_timeout" "$qemu" -cpu "$cpu" "${qemu_env[@]}" "$t" >"$log" 2>&1; then
            rc=0; else rc=$?; fi
        count "$log"
        if ((rc == 124 || rc == 137)); then
            failures+=("$cpu/$name (timed out after $unit_timeout s)"); failed=$((failed + 1))
        elif ((rc != 0)); then
            failures+=("$cpu/$name")
            grep -q '^\[  FAILED  \]' "$log" || failed=$((failed + 1))
            echo "--- $cpu/$name failed (exit $rc):"; tail -40 "$log"
        else
            echo "ok   $cpu/$name ($((SECONDS - t0)) s)"
        fi
        grep -h '^skip:\|^near-tie:\|^kernels:' "$log" | sed "s|^|     $cpu/$name: |" || true
    done
    echo "     $cpu: unit tests took $((SECONDS - start)) s"
done

# The goldens on the plain NEON set too (the loop ran each CPU's best set; a test cannot start
# a copy of itself under qemu-user to run the others).
if [[ -x $dir/tests/test_model_golden ]]; then
    log="$dir/logs/${cpus[0]}/test_model_golden.neon.log"
    if LLAMAPI_ISA=neon timeout --kill-after=10 "$unit_timeout" "$qemu" -cpu "${cpus[0]}" "${qemu_env[@]}" "$dir/tests/test_model_golden" \
        >"$log" 2>&1; then
        echo "ok   ${cpus[0]}/test_model_golden (LLAMAPI_ISA=neon)"
    else
        failures+=("${cpus[0]}/test_model_golden:neon")
        grep -q '^\[  FAILED  \]' "$log" || failed=$((failed + 1))
        echo "--- ${cpus[0]}/test_model_golden (LLAMAPI_ISA=neon) failed:"; tail -40 "$log"
    fi
    count "$log"
fi

start=$SECONDS
if timeout --kill-after=10 900 scripts/smoke-server.sh "$dir" "$qemu" -cpu "${cpus[0]}" "${qemu_env[@]}" \
    >"$dir/logs/smoke.log" 2>&1; then
    grep '^ok' "$dir/logs/smoke.log"
else
    failures+=("smoke"); cat "$dir/logs/smoke.log"
fi
p=$(sed -n 's/^smoke: \([0-9]*\) passed.*/\1/p' "$dir/logs/smoke.log")
f=$(sed -n 's/^smoke: [0-9]* passed, \([0-9]*\) failed/\1/p' "$dir/logs/smoke.log")
passed=$((passed + ${p:-0})); failed=$((failed + ${f:-1}))
echo "     smoke test took $((SECONDS - start)) s"

((${#failures[@]})) && echo "failed: ${failures[*]}"
echo "aarch64: $passed passed, $failed failed, $skipped skipped"
((failed == 0 && ${#failures[@]} == 0))
