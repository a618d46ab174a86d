#!/usr/bin/env bash
# libFuzzer on our parsers (Fuzz/README.md). Builds Fuzz/fuzz-parsers with AddressSanitizer and
# coverage in its own scratch folder, then runs every target (or those named) for FUZZ_SECONDS
# each, FUZZ_JOBS at a time (default: the number of cores), and prints executions, exec/s,
# coverage, corpus size and crashes.
#
#   scripts/fuzz.sh                     every target, FUZZ_SECONDS (default 600) each  (make fuzz)
#   FUZZ_SECONDS=30 FUZZ_SEED=1 scripts/fuzz.sh   the CI smoke run                    (make fuzz-smoke)
#   scripts/fuzz.sh config topic        only these targets
#   scripts/fuzz.sh --build-only
#
# Crash inputs land in Fuzz/crashes/TARGET-crash-… (git-ignored; turn each into a regression test
# with the input inline, and add it to the seed corpus as regression-…). FUZZ_SEED fixes libFuzzer's
# random seed: the CI smoke run replays the same mutations every time (a gate, not an explorer),
# while `make fuzz` draws a new seed per run and explores. The growing corpus lives in
# .build-fuzz/corpus/TARGET; the small seed corpus in Fuzz/corpus/TARGET is read, never written. Exit status: 0 when no target crashed.
set -euo pipefail
cd "$(dirname "$0")/.."

SWIFT=${SWIFT:-swift}
SECONDS_EACH=${FUZZ_SECONDS:-600}
SCRATCH=${FUZZ_SCRATCH:-.build-fuzz}
SEED=${FUZZ_SEED:-}
BUILD_ONLY=0
targets=()
for arg in "$@"; do
    case "$arg" in
        --build-only) BUILD_ONLY=1 ;;
        -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
        *) targets+=("$arg") ;;
    esac
done

# libFuzzer without its main (docs/swift-stack.md "Fuzzing"): from the toolchain that runs `swift`.
toolchain=$(dirname "$(dirname "$(readlink -f "$(command -v "$SWIFT")")")")
runtime=$(ls "$toolchain"/lib/clang/*/lib/linux/libclang_rt.fuzzer_no_main-x86_64.a 2>/dev/null | head -n 1 || true)
if [[ -z "$runtime" ]]; then
    echo "fuzz: libclang_rt.fuzzer_no_main-x86_64.a not found under $toolchain/lib/clang" >&2
    exit 1
fi

build_start=$(date +%s)
echo "fuzz: building fuzz-parsers (ASan + coverage) in $SCRATCH"
PUSHER_MQTT_BRIDGE_FUZZ=1 "$SWIFT" build -j 2 --scratch-path "$SCRATCH" --product fuzz-parsers \
    -Xlinker "$runtime" -Xlinker -lstdc++
bin="$SCRATCH/debug/fuzz-parsers"
echo "fuzz: build took $(( $(date +%s) - build_start )) s"
[[ $BUILD_ONLY == 1 ]] && exit 0

if [[ ${#targets[@]} -eq 0 ]]; then
    mapfile -t targets < <("$bin" list 2>&1 | awk '/^  /{print $1}')
fi

# The Swift runtime keeps some allocations for the process lifetime; leak reports would be noise.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:allocator_may_return_null=1}
# Swift's own backtracer and ASan's handler fight over a crash and the process hangs.
export SWIFT_BACKTRACE=enable=no
mkdir -p Fuzz/crashes "$SCRATCH/corpus" "$SCRATCH/logs"
summary="$SCRATCH/fuzz-summary.txt"
printf '%-20s %8s %12s %8s %6s %7s %8s %s\n' target seconds executions exec/s cov ft corpus crashes | tee "$summary"
# One target: runs it, writes its summary line to $SCRATCH/logs/TARGET.line; exit 1 when it crashed.
run_target() {
    local target=$1
    local corpus="$SCRATCH/corpus/$target"
    mkdir -p "$corpus"
    local dict_args=()
    [[ -f "Fuzz/dictionaries/$target.dict" ]] && dict_args=(-dict="Fuzz/dictionaries/$target.dict")
    [[ -n "$SEED" ]] && dict_args+=(-seed="$SEED")
    local log="$SCRATCH/logs/$target.log"
    local start status=0 elapsed execs rate last cov ft units crash
    start=$(date +%s)
    "$bin" "$target" "$corpus" "Fuzz/corpus/$target" "${dict_args[@]}" \
        -max_total_time="$SECONDS_EACH" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="Fuzz/crashes/$target-" >"$log" 2>&1 || status=$?
    elapsed=$(( $(date +%s) - start ))
    execs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log" | tail -n 1)
    rate=$(sed -nE 's/^stat::average_exec_per_sec: *([0-9]+).*/\1/p' "$log" | tail -n 1)
    last=$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)
    cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$last")
    ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$last")
    units=$(find "$corpus" -type f | wc -l)
    crash=$(grep -oE "Fuzz/crashes/$target-[a-z]+-[0-9a-f]+" "$log" | tail -n 1 || true)
    if [[ $status -ne 0 || -n "$crash" ]]; then
        crash=${crash:-"exit $status, see $log"}
    else
        crash=none
    fi
    printf '%-20s %8s %12s %8s %6s %7s %8s %s\n' "$target" "$elapsed" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "$units" "$crash" \
        >"$SCRATCH/logs/$target.line"
    if [[ $crash != none ]]; then
        grep -E 'INVARIANT VIOLATED|ERROR: AddressSanitizer|ERROR: libFuzzer|Fatal error|Assertion' "$log" | head -n 3 >&2 || true
        return 1
    fi
}

# FUZZ_JOBS targets at a time (default: one per core): each fuzzer is one busy thread, so on the
# 2-core machine two run side by side in the time of one and each still gets its FUZZ_SECONDS.
parallel=${FUZZ_JOBS:-$(nproc)}
failed=0
for target in "${targets[@]}"; do
    while (( $(jobs -rp | wc -l) >= parallel )); do wait -n || failed=1; done
    rm -f "$SCRATCH/logs/$target.line"
    run_target "$target" &
done
while (( $(jobs -rp | wc -l) > 0 )); do wait -n || failed=1; done
for target in "${targets[@]}"; do
    if [[ -f "$SCRATCH/logs/$target.line" ]]; then
        tee -a "$summary" <"$SCRATCH/logs/$target.line"
    else
        failed=1
        printf '%-20s did not finish, see %s\n' "$target" "$SCRATCH/logs/$target.log" | tee -a "$summary"
    fi
done
echo "fuzz: summary in $summary, logs in $SCRATCH/logs"
exit $failed
