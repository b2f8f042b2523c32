#!/usr/bin/env bash
# tools/device_check.sh run on a machine without a GPU, where every gpu test skips at once: checks
# the script's own mechanics, which a GPU run cannot afford to find broken.
#   1. a whole run: the table file ($OUT/summary.md) names every gpu test once, in ctest's order
#      (the gpu_core tests first, then the doctor, then the others), and ends with the verdict;
#   2. a run killed (SIGKILL, the whole process group) as soon as the other tests begin: the table
#      already holds the line of every core test;
#   3. a run whose core tests have no time (CT_T_CORE=0): each is named "not reached", and the
#      verdict lists them.
# Usage: test_device_check_dry.sh SOURCE_DIR BUILD_DIR   (environment: CT_FMNIST_DIR)
set -uo pipefail
src=${1:?usage: test_device_check_dry.sh SOURCE_DIR BUILD_DIR}
build=${2:?usage: test_device_check_dry.sh SOURCE_DIR BUILD_DIR}
fmnist=${CT_FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    echo "skipped: a GPU is present, where tools/device_check.sh runs for real"
    exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cutrain-dc.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; [ -f "$tmp/out/summary.md" ] && { echo "--- summary.md"; cat "$tmp/out/summary.md"; }; exit 1; }

mapfile -t core < <(ctest --test-dir "$build" -N -L gpu_core | sed -n 's/^ *Test *#[0-9]*: *//p')
mapfile -t all < <(ctest --test-dir "$build" -N -L gpu | sed -n 's/^ *Test *#[0-9]*: *//p')
((${#core[@]} > 0 && ${#all[@]} > ${#core[@]})) || fail "ctest lists ${#core[@]} gpu_core and ${#all[@]} gpu tests"
for ((i = 0; i < ${#core[@]}; i++)); do
    [ "${all[$i]}" = "${core[$i]}" ] || fail "gpu test $i is ${all[$i]}, not the core test ${core[$i]}: core tests must come first"
done

# check: device_check.sh with short caps (the benchmark is one tiny CPU run); extra VAR=VALUE first
check() {
    rm -rf "$tmp/out"
    mkdir -p "$tmp/out"
    (cd "$src" && env OUT="$tmp/out" CT_BUILD="$build" CT_PYTHON=/bin/false CT_T_TRAIN=3 CT_TRAIN_EPOCHS=1 \
        CT_T_MEMCHECK=5 CT_BENCH_SETTINGS=fmnist_mlp:32:2 CT_BENCH_PRECISIONS=fp32 CT_BENCH_RUNS=1 "$@" \
        bash tools/device_check.sh "$fmnist" >"$tmp/stdout" 2>&1)
}
# line_of NAME: the table line number of NAME's result, failing unless there is exactly one
line_of() {
    local n
    n=$(grep -c -- "^- \`$1\`: " "$tmp/out/summary.md")
    [ "$n" = 1 ] || fail "summary.md has $n lines for $1"
    grep -n -- "^- \`$1\`: " "$tmp/out/summary.md" | cut -d: -f1
}

# 1. a whole run
check CT_DEADLINE_S=150
rc=$?
[ "$rc" -ne 0 ] || fail "device_check.sh exited 0 without a GPU"
[ -s "$tmp/out/summary.md" ] || fail "no summary.md"
prev=0
for t in "${all[@]}"; do
    n=$(line_of "$t")
    ((n > prev)) || fail "$t is out of order in summary.md"
    prev=$n
done
doctor=$(grep -n -- '^- \[\(FAIL\| ok \)\] doctor' "$tmp/out/summary.md" | cut -d: -f1)
[ -n "$doctor" ] || fail "no doctor line"
(($(line_of "${core[-1]}") < doctor && doctor < $(line_of "${all[${#core[@]}]}"))) ||
    fail "the doctor does not run between the core and the other gpu tests"
grep -q "^- gpu tests (one ctest call each; lines above): FAIL: 0 passed, 0 failed, ${#all[@]} skipped" \
    "$tmp/out/summary.md" || fail "no verdict on the gpu tests"
grep -q '^- result: FAIL' "$tmp/out/summary.md" || fail "no result line"
echo "whole run: ${#all[@]} gpu tests in order (${#core[@]} core), doctor between, verdict written (exit $rc)"

# 2. killed as soon as the other gpu tests begin
rm -rf "$tmp/out"
mkdir -p "$tmp/out"
(cd "$src" && OUT="$tmp/out" CT_BUILD="$build" CT_PYTHON=/bin/false CT_DEADLINE_S=150 \
    exec setsid bash tools/device_check.sh "$fmnist" >"$tmp/stdout" 2>&1) &
pid=$!
for ((i = 0; i < 600; i++)); do
    grep -q '^### gpu tests: other' "$tmp/out/summary.md" 2>/dev/null && break
    sleep 0.1
done
kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
grep -q '^### gpu tests: other' "$tmp/out/summary.md" || fail "the other gpu tests never began"
for t in "${core[@]}"; do line_of "$t" >/dev/null; done
grep -q '^- result:' "$tmp/out/summary.md" && fail "the killed run wrote a verdict: it was not killed mid-way"
echo "killed mid-run: the ${#core[@]} core tests' lines were already in summary.md"

# 3. no time for the core tests
check CT_DEADLINE_S=150 CT_T_CORE=0
for t in "${core[@]}"; do
    grep -q -- "^- \`$t\`: not reached: the 0s of the core tests were spent" "$tmp/out/summary.md" ||
        fail "$t is not named as not reached"
done
grep -q "^- gpu tests .*${#core[@]} not reached.*; not reached: ${core[0]}," "$tmp/out/summary.md" ||
    fail "the verdict does not list the tests not reached"
echo "no time for the core tests: each named as not reached, and listed in the verdict"
echo "PASS"
