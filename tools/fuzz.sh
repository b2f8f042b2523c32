#!/usr/bin/env bash
# Builds every libFuzzer target under tests/fuzz/ and runs each for a bounded time on a copy of its
# seed corpus (tests/fuzz/corpus/<target>/, so the repository is never modified).
#
#   tools/fuzz.sh [SECONDS]     SECONDS per target, default 60
#
# Exits non-zero on any crash, leak, sanitizer report, timeout or out-of-memory, after printing
# the file libFuzzer saved the input to and the end of the log. Needs clang and its fuzzer
# runtime (Debian: apt-get install clang libclang-rt-14-dev); no network.
set -euo pipefail
cd "$(dirname "$0")/.."

secs="${1:-60}"
if ! [[ "$secs" =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: tools/fuzz.sh [SECONDS]  (a positive whole number, got '$secs')" >&2
    exit 2
fi
out=build-fuzz

# ---- the compiler and its fuzzer runtime ----

cc=""
for c in clang clang-19 clang-18 clang-17 clang-16 clang-15 clang-14; do
    if command -v "$c" >/dev/null 2>&1; then
        cc="$c"
        break
    fi
done
if [ -z "$cc" ]; then
    echo "fuzz: error: clang not found (tried clang, clang-19 .. clang-14)." >&2
    echo "fuzz: install it with: apt-get install -y clang libclang-rt-14-dev" >&2
    exit 1
fi

mkdir -p "$out"
# A one-line target tells a missing runtime (libclang-rt-N-dev) apart from a bug in our code.
probe="$out/probe"
printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
    'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }' >"$probe.c"
if ! "$cc" -fsanitize=fuzzer,address,undefined "$probe.c" -o "$probe" >"$probe.log" 2>&1; then
    major=$("$cc" -dumpversion | cut -d. -f1)
    echo "fuzz: error: $cc cannot link -fsanitize=fuzzer,address,undefined: the fuzzer runtime is missing." >&2
    echo "fuzz: install it with: apt-get install -y libclang-rt-${major}-dev" >&2
    sed 's/^/    /' "$probe.log" >&2
    exit 1
fi

# ---- the targets ----

cflags=(-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -std=c11
        -D_POSIX_C_SOURCE=200809L -I engine -I .)
# Globs, so that a new file of the config reader, a new layer record or a new data format (both
# hold their keys, and the table of formats names every format's record) joins the targets without
# editing these lists. The data code's OpenMP pragmas are ignored without -fopenmp: the readers are
# serial anyway.
data_srcs=(data/*.c engine/base/rng.c engine/base/status.c engine/base/file.c)
config_srcs=(engine/config/*.c engine/graph/layers/*.c data/*.c engine/base/status.c engine/base/types.c engine/base/file.c
             engine/base/rng.c)

targets=(config idx cifar image)
declare -A srcs=(
    [config]="tests/fuzz/fuzz_config.c ${config_srcs[*]}"
    [idx]="tests/fuzz/fuzz_idx.c ${data_srcs[*]}"
    [cifar]="tests/fuzz/fuzz_cifar.c ${data_srcs[*]}"
    [image]="tests/fuzz/fuzz_image.c ${data_srcs[*]}"
)
# Written separately; built and run once its file is there.
if [ -f tests/fuzz/fuzz_checkpoint.c ]; then
    targets+=(checkpoint)
    srcs[checkpoint]="tests/fuzz/fuzz_checkpoint.c engine/checkpoint/checkpoint.c engine/base/file.c engine/base/status.c"
fi

for t in "${targets[@]}"; do
    echo "fuzz: building fuzz_$t"
    # shellcheck disable=SC2086  # the source lists are space-separated on purpose
    # data/ decodes images, so every target with its sources links libjpeg and libpng (shared
    # here: the fuzz build runs where it is built)
    "$cc" "${cflags[@]}" -Wno-unknown-pragmas ${srcs[$t]} -ljpeg -lpng16 -lz -lm -pthread -o "$out/fuzz_$t"
done

# ---- running them ----

# The targets write their inputs to files under TMPDIR; inside build-fuzz/ nothing is left in /tmp
# after a crash.
export TMPDIR="$PWD/$out/tmp"
rm -rf "$TMPDIR"
mkdir -p "$TMPDIR"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# Reports with file:line need llvm-symbolizer; a versioned clang keeps it beside itself.
symbolizer=$("$cc" -print-prog-name=llvm-symbolizer)
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ] && [ -x "$symbolizer" ]; then
    export ASAN_SYMBOLIZER_PATH="$symbolizer"
fi

failed=0
for t in "${targets[@]}"; do
    corpus="$out/corpus-$t"
    artifacts="$out/artifacts-$t"
    log="$out/fuzz_$t.log"
    rm -rf "$corpus" "$artifacts"
    mkdir -p "$corpus" "$artifacts"
    if [ -d "tests/fuzz/corpus/$t" ]; then
        cp -R "tests/fuzz/corpus/$t/." "$corpus/"
    fi

    rc=0
    "./$out/fuzz_$t" "$corpus" -max_total_time="$secs" -error_exitcode=1 -timeout=10 \
        -rss_limit_mb=2048 -malloc_limit_mb=512 -print_final_stats=1 \
        -artifact_prefix="$artifacts/" >"$log" 2>&1 || rc=$?

    runs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)
    took=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -n 1)
    if [ "$rc" -eq 0 ] && [ -n "$runs" ]; then
        echo "fuzz $t: $runs executions in ${took:-$secs} s, no crash"
        continue
    fi
    failed=1
    echo "fuzz $t: FAILED (exit status $rc, ${runs:-unknown} executions)" >&2
    # libFuzzer names the saved input in its log; list the folder too in case the log was cut.
    grep -E 'Test unit written to|^artifact_prefix' "$log" >&2 || true
    find "$artifacts" -type f -printf 'fuzz %p\n' >&2
    echo "fuzz $t: reproduce with: $out/fuzz_$t <that file>; last lines of $log:" >&2
    tail -n 60 "$log" >&2
done

if [ "$failed" -ne 0 ]; then
    echo "fuzz: FAILED" >&2
    exit 1
fi
echo "fuzz: all ${#targets[@]} targets passed (${secs} s each)"
