#!/usr/bin/env bash
# The one prepared script for a GPU machine (docs/gpu.md): about six minutes on one
# H200, cut short at $CT_DEADLINE_S (420 s) so that it ends within the device tool's eight-minute
# budget. Run from the repository root:
#
#   bash tools/device_check.sh [FMNIST_DIR [PEER_DIR]]
#
# What matters most runs first, and every stage leaves its lines in the table file
# ($OUT/summary.md) as it ends, so a run cut off anywhere still brings back what it measured:
# 1. uses the build in $CT_BUILD (default build-gpu), unpacking $CT_BUILD.tar.xz first when only
#    the archive travelled (tools/prepare_device_check.sh makes both), when it holds a runnable
#    cutrain; else configures and builds there what the check runs (CUDA on, sm_90, Ninja, the
#    optional libraries the GPU machine lacks off, target device_check_binaries);
# 2. records `nvidia-smi -q`; runs the core gpu tests (label gpu_core: the kernels, the backend,
#    every layer against the CPU, the captured step) one at a time, each bounded by its ctest
#    TIMEOUT and what the stage and the deadline leave, a line each in the table as it ends;
#    `cutrain doctor`; the other gpu tests (the long trainings last) the same way; the kernel
#    tests once under compute-sanitizer's memcheck; then trains models/fmnist_cnn.ini on the GPU
#    in fp16 (target 0.910). A test never reached is named in the table;
# 3. benchmarks cutrain and PyTorch (PEER_DIR/torch_peer.py) side by side at every setting in fp32,
#    fp16 and bf16: same model, batch, data and optimizer (SGD momentum 0.9, lr 0.01); cutrain with
#    --precision P, PyTorch in fp32 or with AMP (torch.autocast, GradScaler for fp16 only,
#    channels_last for conv models). Runs alternate: round 1 does every setting and precision once,
#    cutrain then PyTorch; round 2 again, PyTorch first; both sides get the same number of runs,
#    and a round-2 pair that would not end before the deadline is left out (said in the table);
#    each run's figure goes into the table as it is measured;
# 4. between the rounds, fmnist_cnn fp32 at batch 512 fed by the CPU input pipeline (crop+flip)
#    against PyTorch's DataLoader with 8 workers, with GPU utilization;
# 5. writes full logs to $OUT (else ./device_check_out) and ends the table with, per setting and
#    precision, the medians of both sides, the ratio cutrain/PyTorch (median of the per-run
#    ratios, and their range), and PyTorch's whole-step CUDA-graph figure for reference, measured
#    elsewhere (2026-11-29, same GPU model), not in this run; then the verdict lines.
# Every stage runs under `timeout` and later stages run whatever happened before; the exit status
# is non-zero when any stage failed.
#
# Time plan (seconds; cap = the stage's timeout; expected = a guess for an H200 with the build
# made beforehand by tools/prepare_device_check.sh, to be replaced by measured figures):
#   stage                                      cap   expected
#   environment, unpack, build check            30         5   (a fresh build: cap 300, and the
#                                                               benchmarks lose what it takes)
#   nvidia-smi -q                               30         2
#   core gpu tests (12; ctest TIMEOUT 120 each) 200       90
#   doctor                                      45         5
#   other gpu tests (10; 120, or 180 for the    200      125   (memory, monitor, NCCL with one
#     batch search, trainings, experiment)                      rank, sync_bn, nvJPEG, then the batch
#                                                               search, the two end-to-end
#                                                               trainings, the experiment ladder)
#   memcheck of test_gpu_kernels                45        30
#   train fmnist_cnn fp16 (15 epochs)           90        30
#   pytorch check (imports torch once)          60         5
#   benchmarks round 1: 4 settings x 3 precisions x (cutrain + PyTorch)
#     each cutrain bench run                    45         4
#     each PyTorch run (--seconds 2)            60         6   (the first one imports cold)
#     round total                                        125
#   input pipeline (cutrain 3 epochs; PyTorch)   60+45     25
#   benchmarks round 2 (same)                            125
#   table                                                  1
#   total                                                ~540 of 420 (the deadline trims the
#                                                               pipeline stage and round 2 first)
# Arguments and variables:
#   FMNIST_DIR / $CT_FMNIST_DIR  the four Fashion-MNIST .gz files (default fmnist, falling back to
#                                /usr/share/datasets/fashion-mnist)
#   PEER_DIR / $CT_PEER_DIR      holds torch_peer.py (default tools, this repository's own; also
#                                used when the folder named has none)
#   $CT_PYTHON                   Python with PyTorch (default /opt/torch/.venv/bin/python, else python3)
#   $CT_BUILD                    build folder (default build-gpu)
#   $CT_EXTRA_LIB_DIR            a folder of extra shared libraries put first on LD_LIBRARY_PATH
#                                (default devlibs, when present)
#   $CT_BENCH_SETTINGS           "model:batch:steps ..." (default: the four settings below)
#   $CT_BENCH_PRECISIONS         "fp32 fp16 bf16" (default: all three)
#   $CT_BENCH_RUNS               runs per side, setting and precision: 1 to 5 (default 2)
#   $CT_PEER_SECONDS             PyTorch's timed window per run (default 2)
#   $CT_TRAIN_PRECISION          precision of the training run (default fp16)
#   $CT_TRAIN_EPOCHS             override train.epochs of the training run (default: the config's)
#   $CT_DEADLINE_S               stages that would end later than this many seconds after the start
#                                are cut short or skipped, so the table always prints (default 420)
#   $CT_T_BUILD, $CT_T_DOCTOR, $CT_T_CORE, $CT_T_GPU_REST, $CT_T_MEMCHECK, $CT_T_TRAIN, $CT_T_BENCH,
#   $CT_T_PEER, $CT_T_PIPE       the caps above, in seconds
# Files under $OUT (the device tool brings back at most 8): device_check.log (everything that has
# no file of its own), nvidia-smi.txt, doctor.txt, ctest.log (every gpu test's full output, and
# memcheck's), train_fmnist_cnn.jsonl, bench.jsonl (one line per benchmark run: source, model,
# batch, precision, run, exit status, and the program's JSON line verbatim as "result"),
# summary.md (the table, appended to as each stage ends).
set -euo pipefail

case "${1:-}" in
-h | --help)
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 0
    ;;
esac

ROOT=$(pwd -P)
OUT_DIR=${OUT:-$ROOT/device_check_out}
mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd -P)
LOG=$OUT_DIR/device_check.log
: >"$LOG"
rm -f "$OUT_DIR/bench.jsonl" "$OUT_DIR/train_fmnist_cnn.jsonl" "$OUT_DIR/summary.md" \
    "$OUT_DIR/doctor.txt" "$OUT_DIR/ctest.log" "$OUT_DIR/nvidia-smi.txt"
: >"$OUT_DIR/bench.jsonl"
SUMMARY=$OUT_DIR/summary.md
printf '# tools/device_check.sh, %s\n\nEach line is written as its stage ends; the comparison table and the verdict come last.\n\n' \
    "$(date -u '+%Y-%m-%d %H:%M UTC')" >"$SUMMARY"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
FAILED_FILE=$TMP/failed.txt
: >"$FAILED_FILE"
DEADLINE=${CT_DEADLINE_S:-420}

T_BUILD=${CT_T_BUILD:-300}
T_DOCTOR=${CT_T_DOCTOR:-45}
T_CORE=${CT_T_CORE:-200}
T_GPU_REST=${CT_T_GPU_REST:-200}
T_MEMCHECK=${CT_T_MEMCHECK:-45}
T_TRAIN=${CT_T_TRAIN:-90}
T_BENCH=${CT_T_BENCH:-45}
T_PEER=${CT_T_PEER:-60}
T_PIPE=${CT_T_PIPE:-60}

say() { printf '%s\n' "$*" | tee -a "$LOG"; }
# table LINE...: a line of the table file, written now, so that it survives the run being cut off
table() { printf '%s\n' "$@" >>"$SUMMARY"; }

stage_failed() {
    say "[FAIL] $1: $2"
    table "- [FAIL] $1: $2"
    printf '%s: %s\n' "$1" "$2" >>"$FAILED_FILE"
}

# run_stage [--stdout FILE] NAME SECONDS LOGFILE COMMAND...
# Runs COMMAND under timeout (cut to what the deadline leaves), stdout and stderr appended to
# LOGFILE (stdout to FILE first with --stdout, then copied to LOGFILE). Never fails itself: sets
# STAGE_RC and STAGE_S, and records a failure.
run_stage() {
    local so=""
    if [[ $1 == --stdout ]]; then
        so=$2
        shift 2
    fi
    local name=$1 secs=$2 log=$3
    shift 3
    local left=$((DEADLINE - SECONDS - 20)) t0=$SECONDS rc=0 why
    STAGE_S=0
    if ((left < 5)); then
        STAGE_RC=125
        printf '\n===== %s | skipped: deadline of %ss reached\n' "$name" "$DEADLINE" >>"$log"
        stage_failed "$name" "skipped, the ${DEADLINE}s deadline was reached"
        return 0
    fi
    ((secs > left)) && secs=$left
    printf '\n===== %s | timeout %ss | %s\n' "$name" "$secs" "$*" >>"$log"
    if [[ -n $so ]]; then
        timeout -k 10 "$secs" "$@" >"$so" 2>>"$log" </dev/null || rc=$?
        cat "$so" >>"$log"
    else
        timeout -k 10 "$secs" "$@" >>"$log" 2>&1 </dev/null || rc=$?
    fi
    STAGE_RC=$rc
    STAGE_S=$((SECONDS - t0))
    printf '===== %s | exit %s | %ss\n' "$name" "$rc" "$STAGE_S" >>"$log"
    if ((rc == 0)); then
        say "[ ok ] $name (${STAGE_S}s)"
        table "- [ ok ] $name (${STAGE_S}s)"
        return 0
    fi
    why="exit $rc"
    ((rc == 124 || rc == 137)) && why="timed out after ${secs}s"
    stage_failed "$name" "$why (${STAGE_S}s, log: ${log##*/})"
}

# ---- Python: PyTorch's for the peer, any for parsing JSON ------------------------------------
PY=${CT_PYTHON:-}
if [[ -z $PY ]]; then
    if [[ -x /opt/torch/.venv/bin/python ]]; then PY=/opt/torch/.venv/bin/python; else PY=python3; fi
fi
if command -v python3 >/dev/null 2>&1; then PYJ=python3; else PYJ=$PY; fi

# json_line FILE: prints the last line of FILE that is a JSON object, verbatim; fails when none.
json_line() {
    "$PYJ" -c '
import json, sys
for line in reversed(open(sys.argv[1], errors="replace").read().splitlines()):
    line = line.strip()
    if line.startswith("{"):
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if isinstance(d, dict):
            print(line)
            sys.exit(0)
sys.exit(1)' "$1"
}

# ---- data, peer, libraries -------------------------------------------------------------------
FMNIST_FILES=(train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz
    t10k-labels-idx1-ubyte.gz)
have_fmnist() {
    local f
    for f in "${FMNIST_FILES[@]}"; do [[ -s $1/$f ]] || return 1; done
}
DATA=${1:-${CT_FMNIST_DIR:-fmnist}}
if ! have_fmnist "$DATA" && have_fmnist /usr/share/datasets/fashion-mnist; then
    DATA=/usr/share/datasets/fashion-mnist
fi
if have_fmnist "$DATA"; then
    DATA=$(cd "$DATA" && pwd -P)
else
    stage_failed "data" "no Fashion-MNIST .gz files in '$DATA' nor /usr/share/datasets/fashion-mnist"
    [[ $DATA == /* ]] || DATA=$ROOT/$DATA
fi
DATA_SETS=(--set "data.train=$DATA/train-images-idx3-ubyte.gz"
    --set "data.train_labels=$DATA/train-labels-idx1-ubyte.gz"
    --set "data.test=$DATA/t10k-images-idx3-ubyte.gz"
    --set "data.test_labels=$DATA/t10k-labels-idx1-ubyte.gz")

PEER=${2:-${CT_PEER_DIR:-tools}}
if [[ ! -f $PEER/torch_peer.py && -f $ROOT/tools/torch_peer.py ]]; then PEER=$ROOT/tools; fi
if [[ -f $PEER/torch_peer.py ]]; then
    PEER=$(cd "$PEER" && pwd -P)
else
    stage_failed "peer" "no torch_peer.py in '$PEER'"
fi

# PyTorch's own CUDA libraries (its site-packages' nvidia/ folders) can be newer than the GPU
# machine's system ones, and match the headers of a build made elsewhere: put them first.
libdirs=()
EXTRA_LIB=${CT_EXTRA_LIB_DIR:-$ROOT/devlibs}
[[ -d $EXTRA_LIB ]] && libdirs+=("$(cd "$EXTRA_LIB" && pwd -P)")
# nvJPEG for decode = gpu (loaded with dlopen, test_gpu_nvjpeg): the wheel's library that
# tools/prepare_device_check.sh carries, when it could download it; else whatever the Python
# environment's nvidia/cu13/lib holds, or the system's
[[ -f $ROOT/nvjpeg/libnvjpeg.so.13 ]] && libdirs+=("$(cd "$ROOT/nvjpeg" && pwd -P)")
for nv in /opt/torch/.venv/lib/python3*/site-packages/nvidia; do
    for sub in cu13 cudnn nccl; do
        [[ -d $nv/$sub/lib ]] && libdirs+=("$nv/$sub/lib")
    done
done
if ((${#libdirs[@]})); then
    joined=$(IFS=:; printf '%s' "${libdirs[*]}")
    export LD_LIBRARY_PATH="$joined${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

{
    echo "===== environment"
    date -u '+%Y-%m-%dT%H:%M:%SZ'
    uname -a
    echo "root: $ROOT"
    echo "out: $OUT_DIR"
    echo "data: $DATA"
    echo "peer: $PEER"
    echo "python (peer): $PY; python (parsing): $PYJ"
    echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
    nvcc --version 2>&1 | tail -n 2 || echo "nvcc: not found"
    cmake --version 2>&1 | head -n 1 || echo "cmake: not found"
    echo "ninja $(ninja --version 2>&1 || echo 'not found')"
    timeout -k 5 20 nvidia-smi 2>&1 || echo "nvidia-smi: failed or timed out"
} >>"$LOG" 2>&1
say "device_check: data $DATA, peer $PEER, out $OUT_DIR"

# ---- 1. build --------------------------------------------------------------------------------
BUILD=${CT_BUILD:-build-gpu}
[[ $BUILD == /* ]] || BUILD=$ROOT/$BUILD

# The prepared build travels packed (tools/prepare_device_check.sh): unpack it beside the archive,
# with xz, or with Python's lzma where xz is missing.
if [[ ! -x $BUILD/cutrain && -s $BUILD.tar.xz ]]; then
    t0=$SECONDS
    if { command -v xz >/dev/null 2>&1 && xz -dc "$BUILD.tar.xz" | tar -C "$(dirname "$BUILD")" -xf -; } >>"$LOG" 2>&1 ||
        "$PYJ" -c 'import sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    t.extractall(sys.argv[2])' "$BUILD.tar.xz" "$(dirname "$BUILD")" >>"$LOG" 2>&1; then
        say "[ ok ] unpacked $BUILD.tar.xz ($((SECONDS - t0))s)"
    else
        stage_failed "unpack" "could not unpack $BUILD.tar.xz (see device_check.log)"
    fi
fi

cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$BUILD/CMakeCache.txt" 2>/dev/null | head -n 1; }

bin_runs() {
    [[ -x $BUILD/cutrain ]] || return 1
    {
        echo "===== $BUILD/cutrain --version; ldd"
        ldd "$BUILD/cutrain" || true
    } >>"$LOG" 2>&1
    timeout 30 "$BUILD/cutrain" --version >>"$LOG" 2>&1 </dev/null
}

# A build made on another machine names its source folder and its own folder by absolute paths
# (ctest's test list, CT_SOURCE_DIR in the tests): point the old source path here when it is free.
# Its tests read Fashion-MNIST from the cached CT_FMNIST_DIR (ctest's ENVIRONMENT property wins
# over ours): when that folder, read through the link, has no data, reconfigure (no rebuild) to
# point it at $DATA.
fix_prebuilt() {
    local home fm
    home=$(cache_value CMAKE_HOME_DIRECTORY)
    if [[ -n $home && $home != "$ROOT" ]]; then
        if [[ ! -e $home ]] && mkdir -p "$(dirname "$home")" && ln -s "$ROOT" "$home"; then
            say "prebuilt $BUILD was configured in $home: linked $home -> $ROOT"
        elif [[ ! $home -ef $ROOT ]]; then
            say "prebuilt $BUILD was configured in $home, which is taken: ctest may not find its tests"
        fi
    fi
    fm=$(cache_value CT_FMNIST_DIR)
    if [[ -n $fm && $fm != "$DATA" ]] && ! have_fmnist "$fm" && have_fmnist "$DATA"; then
        if timeout 90 cmake "$BUILD" -DCT_FMNIST_DIR="$DATA" >>"$LOG" 2>&1 </dev/null; then
            say "prebuilt $BUILD: CT_FMNIST_DIR set to $DATA for the tests"
        else
            say "prebuilt $BUILD: could not reconfigure CT_FMNIST_DIR (tests use $fm)"
        fi
    fi
}

BIN_OK=0
if [[ -x $BUILD/cutrain ]]; then
    fix_prebuilt
    if bin_runs; then
        BIN_OK=1
        say "[ ok ] using the build in $BUILD"
    else
        missing=$(ldd "$BUILD/cutrain" 2>/dev/null | grep 'not found' | awk '{print $1}' | tr '\n' ' ' || true)
        say "prebuilt $BUILD/cutrain does not run${missing:+ (missing: $missing)}; building afresh"
        BUILD=$BUILD-fresh
    fi
fi
if ((!BIN_OK)); then
    if [[ -f $BUILD/CMakeCache.txt && $(cache_value CMAKE_HOME_DIRECTORY) != "$ROOT" ]]; then
        BUILD=$BUILD-fresh
    fi
    # as tools/prepare_device_check.sh builds: no optional library, only what the check runs
    run_stage "configure" 120 "$LOG" cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCUTRAIN_CUDA=ON \
        -DCUTRAIN_OPENBLAS=OFF -DCUTRAIN_ONEDNN=OFF -DCUTRAIN_MPI=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DCT_FMNIST_DIR="$DATA"
    if ((STAGE_RC == 0)); then
        run_stage "build" "$T_BUILD" "$LOG" cmake --build "$BUILD" --target device_check_binaries
    fi
    if bin_runs; then
        BIN_OK=1
    else
        stage_failed "cutrain binary" "no runnable $BUILD/cutrain (see device_check.log)"
    fi
fi
CT=$BUILD/cutrain

# cutrain_stage NAME SECONDS LOG ARGS...: a stage that runs cutrain, skipped without a binary.
cutrain_stage() {
    local sopt=()
    if [[ $1 == --stdout ]]; then
        sopt=(--stdout "$2")
        shift 2
    fi
    if ((!BIN_OK)); then
        STAGE_RC=126
        STAGE_S=0
        stage_failed "$1" "skipped, no cutrain binary"
        return 0
    fi
    run_stage ${sopt[@]+"${sopt[@]}"} "$1" "$2" "$3" "$CT" "${@:4}"
}

# ---- 2. snapshot, gpu tests, doctor, one training run -----------------------------------------
run_stage "nvidia-smi -q" 30 "$OUT_DIR/nvidia-smi.txt" nvidia-smi -q
gpu_name=$(sed -n 's/^ *Product Name *: *//p' "$OUT_DIR/nvidia-smi.txt" 2>/dev/null | head -n 1)
table "- GPU: ${gpu_name:-unknown}"

# The gpu tests, in the order ctest declares them (tests/CMakeLists.txt: label gpu_core first,
# the long trainings last), one ctest call each, so that each gets its own line in the table as
# it ends and one that hangs costs only its own time. $TMP/gpu_tests.tsv keeps NAME, GROUP,
# RESULT, SECONDS for the verdict; the figures the tests report (gpu_report in tests/gpu_test.h)
# follow their line.
GPU_TSV=$TMP/gpu_tests.tsv
: >"$GPU_TSV"
: >"$TMP/gpu_report.txt"
gpu_core=()
gpu_rest=()
if ((BIN_OK)); then
    mapfile -t gpu_core < <(ctest --test-dir "$BUILD" -N -L gpu_core 2>>"$LOG" | sed -n 's/^ *Test *#[0-9]*: *//p')
    while IFS= read -r t; do
        [[ " ${gpu_core[*]} " == *" $t "* ]] || gpu_rest+=("$t")
    done < <(ctest --test-dir "$BUILD" -N -L gpu 2>>"$LOG" | sed -n 's/^ *Test *#[0-9]*: *//p')
    table "- gpu tests planned, in order: core: ${gpu_core[*]:-none}; then: ${gpu_rest[*]:-none}"
    ((${#gpu_core[@]})) || stage_failed "gpu tests" "ctest lists no gpu_core test in $BUILD"
fi

# run_gpu_tests GROUP CAP NAME...: each test under ctest, bounded by its TIMEOUT, the CAP seconds of
# the group and the deadline; a test with under 10 s left is not started ("not reached").
run_gpu_tests() {
    local group=$1 cap=$2 t0=$SECONDS name left secs rc out result why sec
    shift 2
    table "" "### gpu tests: $group" ""
    for name in "$@"; do
        left=$((cap - (SECONDS - t0)))
        secs=$((DEADLINE - SECONDS - 20))
        ((secs < left)) || secs=$left
        if ((secs < 10)); then
            why="not reached: $( ((left < 10)) && echo "the ${cap}s of the $group tests were spent" || echo "the ${DEADLINE}s deadline")"
            table "- \`$name\`: $why"
            printf '%s\t%s\tnot reached\t0\n' "$name" "$group" >>"$GPU_TSV"
            continue
        fi
        out=$TMP/test.out
        rc=0
        : >"$TMP/report_one.txt"
        printf '\n===== %s (%s) | at most %ss\n' "$name" "$group" "$secs" >>"$OUT_DIR/ctest.log"
        # into ctest.log as it runs: a run killed mid-test still shows how far that test got
        env CT_FMNIST_DIR="$DATA" CT_GPU_REPORT="$TMP/report_one.txt" timeout -k 5 "$secs" \
            ctest --test-dir "$BUILD" -R "^$name\$" -V --timeout 180 2>&1 </dev/null |
            tee -a "$OUT_DIR/ctest.log" >"$out" || rc=$?
        sec=$(sed -n "s/.*Test *#[0-9]*: $name .* \([0-9.]*\) sec.*/\1/p" "$out" | tail -n 1)
        if ((rc == 124 || rc == 137)); then
            result="cut off after ${secs}s"
        elif grep -q "Test *#[0-9]*: $name .*Passed" "$out"; then
            result=passed
        elif grep -q "Test *#[0-9]*: $name .*Skipped" "$out"; then
            why=$(grep -m 1 -o 'skipped: .*' "$out" || true)
            result="skipped${why:+ (${why#skipped: })}"
        elif grep -q "Test *#[0-9]*: $name .*Timeout" "$out"; then
            result="timed out (ctest's TIMEOUT)"
        elif grep -q "Test *#[0-9]*: $name " "$out"; then
            result="failed: $(grep -o "Test *#[0-9]*: $name .*" "$out" | tail -n 1 | sed 's/.*\*\*\*//; s/ *[0-9.]* sec.*//')"
        else
            result="failed: ctest did not run it (exit $rc; see ctest.log)"
        fi
        table "- \`$name\`: **$result**, ${sec:-?} s"
        if [[ -s $TMP/report_one.txt ]]; then
            sed 's/^/      /' "$TMP/report_one.txt" >>"$SUMMARY"
            cat "$TMP/report_one.txt" >>"$TMP/gpu_report.txt"
        fi
        printf '%s\t%s\t%s\t%s\n' "$name" "$group" "$result" "${sec:-0}" >>"$GPU_TSV"
        say "      $name: $result"
    done
    table ""
}

if ((BIN_OK)); then
    run_gpu_tests core "$T_CORE" ${gpu_core[@]+"${gpu_core[@]}"}
fi
cutrain_stage "doctor" "$T_DOCTOR" "$OUT_DIR/doctor.txt" doctor
DOCTOR_RC=$STAGE_RC
if ((BIN_OK)); then
    run_gpu_tests other "$T_GPU_REST" ${gpu_rest[@]+"${gpu_rest[@]}"}
else
    stage_failed "gpu tests" "skipped, no cutrain build"
fi

# compute-sanitizer's memcheck over the kernel tests, once: out-of-bounds and misaligned accesses
# that a comparison with the CPU can miss. Its time is not a failure; an error it finds is.
SANITIZER=$(command -v compute-sanitizer || true)
[[ -n $SANITIZER || ! -x /usr/local/cuda/bin/compute-sanitizer ]] || SANITIZER=/usr/local/cuda/bin/compute-sanitizer
if ((BIN_OK)) && [[ -n $SANITIZER && -x $BUILD/tests/test_gpu_kernels ]]; then
    run_stage "memcheck test_gpu_kernels" "$T_MEMCHECK" "$OUT_DIR/ctest.log" env CT_FMNIST_DIR="$DATA" \
        "$SANITIZER" --tool memcheck --error-exitcode 99 --print-limit 20 "$BUILD/tests/test_gpu_kernels"
    # not the code's failures: out of time, or a machine whose runtime the sanitizer cannot use
    # (seen on gVisor: "Device not supported"); memory errors (99) and the test's own failure are
    why=""
    if ((STAGE_RC == 124 || STAGE_RC == 137)); then
        why="memcheck did not finish within its time"
    elif ((STAGE_RC != 0 && STAGE_RC != 99)) && tail -n 40 "$OUT_DIR/ctest.log" | grep -q "Device not supported"; then
        why="compute-sanitizer cannot use this GPU here (\"Device not supported\")"
    fi
    if [[ -n $why ]]; then
        table "  ($why: not counted as a failure)"
        sed -i '$d' "$FAILED_FILE"
    fi
else
    table "- memcheck: skipped ($( ((BIN_OK)) && echo "no compute-sanitizer" || echo "no build"))"
fi

# fp16 by default: ctest's test_gpu_e2e_cnn trains the same model in fp32 just before
TRAIN_PREC=${CT_TRAIN_PRECISION:-fp16}
train_args=(--config models/fmnist_cnn.ini --devices 0 --precision "$TRAIN_PREC" "${DATA_SETS[@]}")
[[ -n ${CT_TRAIN_EPOCHS:-} ]] && train_args+=(--set "train.epochs=$CT_TRAIN_EPOCHS")
cutrain_stage "train fmnist_cnn $TRAIN_PREC" "$T_TRAIN" "$LOG" "${train_args[@]}" \
    --log "$OUT_DIR/train_fmnist_cnn.jsonl"
TRAIN_RC=$STAGE_RC

# ---- 3. benchmarks, side by side, in rounds ----------------------------------------------------
SETTINGS=${CT_BENCH_SETTINGS:-"fmnist_cnn:256:500 fmnist_cnn:16384:40 fmnist_mlp_wide:4096:300 cifar_resnet18:512:30"}
PRECISIONS=${CT_BENCH_PRECISIONS:-"fp32 fp16 bf16"}
RUNS=${CT_BENCH_RUNS:-2}
if [[ ! $RUNS =~ ^[1-5]$ ]]; then
    say "CT_BENCH_RUNS='$RUNS' is not 1 to 5: using 2"
    RUNS=2
fi
PEER_SECONDS=${CT_PEER_SECONDS:-2}
read -r -a settings <<<"$SETTINGS"
read -r -a precisions <<<"$PRECISIONS"
OPT_SETS=(--set train.optimizer=momentum --set train.learning_rate=0.01 --set train.momentum=0.9)
LEFT_OUT_FILE=$TMP/left_out.txt
: >"$LEFT_OUT_FILE"

# record SOURCE MODEL BATCH PRECISION RUN RC [JSON]: one line of bench.jsonl, the JSON verbatim.
record() {
    printf '{"source": "%s", "model": "%s", "batch": %s, "precision": "%s", "run": %s, "rc": %s, "result": %s}\n' \
        "$1" "$2" "$3" "$4" "$5" "$6" "${7:-null}" >>"$OUT_DIR/bench.jsonl"
}

# bench_one SOURCE NAME MODEL BATCH PRECISION RUN COMMAND...: runs one benchmark, records its
# JSON line; fails when there is none.
bench_one() {
    local src=$1 name=$2 model=$3 batch=$4 prec=$5 run=$6 line=""
    shift 6
    local so=$TMP/bench.out
    : >"$so"
    case $src in
    cutrain*) cutrain_stage --stdout "$so" "$name" "$T_BENCH" "$LOG" "$@" ;;
    *) run_stage --stdout "$so" "$name" "$T_PEER" "$LOG" "$@" ;;
    esac
    if ((STAGE_RC == 0)); then
        if line=$(json_line "$so"); then
            say "      $line"
            table "  $(grep -o '"\(images_per_s\|img_s\)": *[0-9.e+]*' <<<"$line" | head -n 1 | sed 's/.*: *//') img/s"
        else
            line=""
            stage_failed "$name" "no JSON line in its output"
        fi
    fi
    record "$src" "$model" "$batch" "$prec" "$run" "$STAGE_RC" "$line"
    [[ -n $line ]]
}

# PyTorch, once: it imports, sees the GPU, and has what the peer needs (also warms the import, so
# the first timed run does not pay for a cold one). Without it the PyTorch runs are skipped.
PEER_WHY=""
if [[ ! -f $PEER/torch_peer.py ]]; then
    PEER_WHY="no torch_peer.py in '$PEER'"
else
    log_lines=$(wc -l <"$LOG")
    run_stage --stdout "$TMP/torch.txt" "pytorch check ($PY)" 60 "$LOG" "$PY" -c '
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda)
assert torch.cuda.is_available(), "torch.cuda.is_available() is False"
print(torch.cuda.get_device_name(0), "bf16 supported:", torch.cuda.is_bf16_supported())
import numpy
print("numpy", numpy.__version__)
try:
    import torchvision
    print("torchvision", torchvision.__version__)
except ImportError:
    print("no torchvision: the cifar_resnet18 runs will fail")'
    if ((STAGE_RC != 0)); then
        why=$(tail -n "+$((log_lines + 1))" "$LOG" | grep -E '^[A-Za-z.]*(Error|Exception)' | tail -n 1 || true)
        PEER_WHY="$PY: ${why:-the PyTorch check failed (exit $STAGE_RC)}"
        say "      PyTorch unusable ($PEER_WHY): every PyTorch run is skipped"
    fi
fi

# bench_cutrain / bench_pytorch MODEL BATCH STEPS PRECISION RUN: one run of either side.
bench_cutrain() {
    local dsets=()
    [[ $1 == cifar* ]] || dsets=("${DATA_SETS[@]}")
    bench_one cutrain "bench cutrain $1 b$2 $4 run $5" "$1" "$2" "$4" "$5" \
        bench --config "models/$1.ini" --batch "$2" --steps "$3" --precision "$4" \
        ${dsets[@]+"${dsets[@]}"} "${OPT_SETS[@]}" || true
}
bench_pytorch() {
    if [[ -n $PEER_WHY ]]; then   # already failed once, by name, above
        echo "bench pytorch $1 b$2 $4 run $5: skipped, $PEER_WHY" >>"$LOG"
        record pytorch "$1" "$2" "$4" "$5" 126
        return 0
    fi
    bench_one pytorch "bench pytorch $1 b$2 $4 run $5" "$1" "$2" "$4" "$5" \
        env PYTHONUNBUFFERED=1 "$PY" "$PEER/torch_peer.py" --model "$1" --batch "$2" \
        --precision "$4" --data "$DATA" --seconds "$PEER_SECONDS" || true
}

# bench_round R: every setting and precision once on each side, cutrain first in odd rounds and
# PyTorch first in even ones. After round 1, a pair is run only when its round-1 time (or 60 s)
# still fits before the deadline; one that does not is left out on both sides and listed.
declare -A pair_s=()
bench_round() {
    local r=$1 s model batch steps prec key need t0
    for s in "${settings[@]}"; do
        IFS=: read -r model batch steps <<<"$s"
        for prec in "${precisions[@]}"; do
            key=$model:$batch:$prec
            if ((r > 1)); then
                need=${pair_s[$key]:-60}
                ((need >= 10)) || need=10
                if ((SECONDS + need + 20 > DEADLINE)); then
                    say "[left out] $model b$batch $prec run $r: needs ~${need}s, $((DEADLINE - SECONDS))s left before the ${DEADLINE}s deadline"
                    printf '%s\n' "$key:$r" >>"$LEFT_OUT_FILE"
                    continue
                fi
            fi
            t0=$SECONDS
            if ((r % 2)); then
                bench_cutrain "$model" "$batch" "$steps" "$prec" "$r"
                bench_pytorch "$model" "$batch" "$steps" "$prec" "$r"
            else
                bench_pytorch "$model" "$batch" "$steps" "$prec" "$r"
                bench_cutrain "$model" "$batch" "$steps" "$prec" "$r"
            fi
            ((r > 1)) || pair_s[$key]=$((SECONDS - t0))
        done
    done
}

# ---- 4. the input pipeline feeding the GPU -----------------------------------------------------
# fmnist_cnn fp32 at batch 512 with crop+flip+normalise on the CPU workers, the usual per-sample
# setup, against PyTorch's DataLoader with 8 workers; GPU utilization sampled by nvidia-smi.
# gpu_util_mean FILE: the mean of nvidia-smi's samples after the first two seconds (start-up).
gpu_util_mean() {
    "$PYJ" -c 'import sys
v = [float(l) for l in open(sys.argv[1]) if l.strip().replace(".", "", 1).isdigit()]
v = v[20:] or v
print("%.1f" % (sum(v) / len(v)) if v else "null")' "$1" 2>/dev/null || echo null
}
pipeline_stage() {
    local pipe_sets=(--set train.batch=512 --set train.epochs=3 --set "data.augment=crop:2, flip"
        --precision fp32 "${OPT_SETS[@]}")
    local smi prc util line
    if ((BIN_OK)) && command -v nvidia-smi >/dev/null 2>&1; then
        nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 100 >"$TMP/util.txt" 2>/dev/null &
        smi=$!
        cutrain_stage "pipeline cutrain fmnist_cnn b512" "$T_PIPE" "$LOG" --config models/fmnist_cnn.ini \
            --devices 0 "${DATA_SETS[@]}" "${pipe_sets[@]}" --log "$TMP/pipeline.jsonl"
        prc=$STAGE_RC
        kill "$smi" 2>/dev/null || true
        wait "$smi" 2>/dev/null || true
        util=$(gpu_util_mean "$TMP/util.txt")
        line=$(json_line "$TMP/pipeline.jsonl" 2>/dev/null || echo "")
        say "      pipeline: ${line:-no epoch logged}, mean GPU util $util"
        record cutrain-pipeline fmnist_cnn 512 fp32 1 "$prc" \
            "$("$PYJ" -c 'import json, sys
d = json.loads(sys.argv[1]) if sys.argv[1] else {}
d["gpu_util"] = None if sys.argv[2] == "null" else float(sys.argv[2])
print(json.dumps(d))' "$line" "$util" 2>/dev/null || echo null)"
    else
        stage_failed "pipeline cutrain fmnist_cnn b512" \
            "skipped, $( ((BIN_OK)) && echo "no nvidia-smi to sample GPU utilization" || echo "no cutrain binary")"
    fi
    if [[ -n $PEER_WHY ]]; then
        echo "pipeline pytorch fmnist_cnn b512 (8 workers): skipped, $PEER_WHY" >>"$LOG"
    else
        bench_one pytorch-pipeline "pipeline pytorch fmnist_cnn b512 (8 workers)" fmnist_cnn 512 fp32 1 \
            env PYTHONUNBUFFERED=1 "$PY" "$PEER/torch_peer.py" --model fmnist_cnn --batch 512 --pipeline 8 \
            --precision fp32 --data "$DATA" --seconds 3 || true
    fi
}

bench_round 1
pipeline_stage
for ((round = 2; round <= RUNS; round++)); do
    bench_round "$round"
done

# ---- 5. the table ------------------------------------------------------------------------------
# shellcheck disable=SC2016 # Python, not shell: nothing to expand
TABLE_PY='
import json, os, re, sys

out = os.environ["CT_OUT"]
fails = [l for l in open(os.environ["CT_FAILED"]).read().splitlines() if l.strip()]


def read(name):
    try:
        return open(os.path.join(out, name), errors="replace").read()
    except OSError:
        return ""


def num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def rate(x):
    if x >= 1e6:
        return "%.2fM" % (x / 1e6)
    if x >= 1e3:
        return "%.1fk" % (x / 1e3)
    return "%.0f" % x


recs = []
for line in read("bench.jsonl").splitlines():
    try:
        recs.append(json.loads(line))
    except ValueError:
        pass

gpu = "the GPU"
m = re.search(r"Product Name\s*:\s*(.+)", read("nvidia-smi.txt"))
if m:
    gpu = m.group(1).strip()

# PyTorch with the whole training step captured by hand in one CUDA graph, its best effort at
# these settings: measured elsewhere (2026-11-29, one H200, PyTorch 2.11 cu130, data on the GPU,
# cifar_resnet18 with channels_last), not in this run; for reference only, no ratio is taken.
REF_GRAPH = {("fmnist_cnn", 256, "fp32"): 419e3, ("fmnist_cnn", 256, "fp16"): 496e3,
             ("fmnist_cnn", 2048, "fp32"): 742e3, ("fmnist_cnn", 2048, "fp16"): 923e3,
             ("fmnist_cnn", 16384, "fp32"): 876e3, ("fmnist_cnn", 16384, "fp16"): 1.08e6,
             ("fmnist_mlp_wide", 4096, "fp16"): 10.9e6, ("tiny_layers", 256, "fp32"): 405e3,
             ("cifar_resnet18", 512, "fp16"): 77e3}
PEER_NAME = {"fp32": "fp32", "fp16": "AMP fp16", "bf16": "AMP bf16"}


def median(v):
    v = sorted(v)
    n = len(v)
    return None if not n else (v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2)


runs = int(os.environ.get("CT_RUNS", "2"))
left_out = set(l.strip() for l in open(os.environ["CT_LEFT_OUT"]).read().splitlines() if l.strip())
lines = ["## cutrain vs PyTorch on %s, training images/s" % gpu, "",
         "Same model, batch, data and optimizer (SGD, momentum 0.9, lr 0.01), data on the GPU, both sides "
         "measured in this run, alternating. fp32: the fp32 convolutions of PyTorch may use TF32 (cuDNN default, "
         "`torch.backends.cudnn.allow_tf32 = True`) while its matrix products do not "
         "(`torch.backends.cuda.matmul.allow_tf32 = False`); cutrain does the same by default. "
         "fp16 / bf16: cutrain `--precision` (fp32 master weights, fp32 output layer; fp16 with dynamic "
         "loss scaling on the device) against PyTorch AMP (`torch.autocast`; `GradScaler` for fp16 only; "
         "channels_last for the convolutional models).", "",
         "| model | batch | precision | cutrain img/s | PyTorch img/s | cutrain / PyTorch (range) | pairs "
         "| cutrain ms/step | PyTorch GPU util | cutrain backend | PyTorch whole-step graph, elsewhere* |",
         "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
for s in os.environ.get("CT_SETTINGS", "").split():
    model, batch, _steps = s.split(":")
    batch = int(batch)
    for prec in os.environ.get("CT_PRECISIONS", "fp32").split():
        mine = [r for r in recs if r.get("model") == model and r.get("batch") == batch
                and r.get("precision") == prec and isinstance(r.get("result"), dict)]
        cr = {r.get("run"): r["result"] for r in mine
              if r.get("source") == "cutrain" and num(r["result"].get("images_per_s"))}
        pr = {r.get("run"): r["result"] for r in mine
              if r.get("source") == "pytorch" and num(r["result"].get("img_s"))}
        c_med = median([d["images_per_s"] for d in cr.values()])
        p_med = median([d["img_s"] for d in pr.values()])
        ratios = sorted(cr[k]["images_per_s"] / pr[k]["img_s"] for k in cr if k in pr and pr[k]["img_s"] > 0)
        if ratios:
            ratio = "%.2fx" % median(ratios)
            ratio += " (%.2f-%.2f)" % (ratios[0], ratios[-1]) if len(ratios) > 1 else " (1 pair)"
        else:
            ratio = "-"
        n_out = sum(1 for k in range(2, runs + 1) if "%s:%d:%s:%d" % (model, batch, prec, k) in left_out)
        pairs = "%d of %d" % (len(ratios), runs) + (" (%d left out: time)" % n_out if n_out else "")
        backend = "FAIL"
        if cr:
            c = cr[min(cr)]
            b = str(c.get("backend", "?"))
            g = c.get("graph")
            backend = b + (", graph" if g else (", no graph" if g is not None else ""))
            if c.get("precision") not in (None, prec):
                backend += " (FAIL: ran %s)" % c.get("precision")
                fails.append("bench cutrain %s b%d %s: ran in %s" % (model, batch, prec, c.get("precision")))
            skipped = [d.get("skipped_steps") for d in cr.values() if num(d.get("skipped_steps"))]
            if skipped and max(skipped) > 0:
                backend += ", %d skipped steps" % max(skipped)
            if b.lower() == "cpu":
                backend += " (FAIL: not the GPU)"
                fails.append("bench cutrain %s b%d %s: ran on the CPU backend" % (model, batch, prec))
        ms = median([d["ms_per_step"] for d in cr.values() if num(d.get("ms_per_step"))])
        util = median([d["gpu_util"] for d in pr.values() if num(d.get("gpu_util"))])
        ref = REF_GRAPH.get((model, batch, prec))
        lines.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            model, batch, prec,
            rate(c_med) if cr else "FAIL",
            (rate(p_med) if pr else "FAIL") + ("" if prec == "fp32" else " (%s)" % PEER_NAME.get(prec, prec)),
            ratio, pairs,
            "%.3f" % ms if num(ms) else ("-" if cr else "FAIL"),
            "%.0f%%" % util if num(util) else ("n/a" if pr else "FAIL"),
            backend,
            rate(ref) if ref else "-"))
lines.append("")
lines.append("cutrain: `cutrain bench --precision P` (20 warm-up steps, then five windows timed with CUDA "
             "events); PyTorch: `torch_peer.py --precision P --seconds %s` (15 warm-up steps, then one window "
             "timed after a synchronize). Run k of one side follows or precedes run k of the other "
             "(cutrain first in odd rounds, PyTorch first in even ones). img/s and ms/step: medians over "
             "the runs; cutrain / PyTorch: the median of the per-pair ratios, with their lowest and highest. "
             "Raw JSON lines: bench.jsonl." % os.environ.get("CT_PEER_SECONDS", "2"))
lines.append("")
lines.append("*Not measured in this run: PyTorch 2.11 (cu130) on an H200 on 2026-11-29, the whole step "
             "(forward, backward, SGD momentum) captured by hand in one CUDA graph, data on the GPU "
             "(cifar_resnet18 with channels_last); `-` where none was measured. For reference only: no "
             "ratio is taken against a figure from another run.")
lines.append("")

# gpu tests: one line each in the TSV, in the order run (NAME, GROUP, RESULT, SECONDS)
tests = []
for l in open(os.environ["CT_GPU_TSV"]).read().splitlines():
    f = l.split("\t")
    if len(f) == 4:
        tests.append(f)
if not tests:
    t = "FAIL: none ran (no build, or ctest lists no gpu test)"
    fails.append("gpu tests: none ran")
else:
    def named(pred):
        return [f[0] for f in tests if pred(f)]
    passed = named(lambda f: f[2] == "passed")
    skipped = named(lambda f: f[2].startswith("skipped"))
    unreached = named(lambda f: f[2] == "not reached")
    failed = named(lambda f: f[0] not in passed + skipped + unreached)
    # a core test needs one GPU and nothing else: its skip means the GPU was not seen
    core_skipped = named(lambda f: f[1] == "core" and f[2].startswith("skipped"))
    ok = not failed and not unreached and not core_skipped
    t = "%s: %d passed, %d failed, %d skipped, %d not reached, of %d" % (
        "PASS" if ok else "FAIL", len(passed), len(failed), len(skipped), len(unreached), len(tests))
    for what, names in (("failed", failed), ("skipped", skipped), ("not reached", unreached)):
        if names:
            t += "; %s: %s" % (what, ", ".join(names))
    if failed:
        fails.append("gpu tests failed: " + ", ".join(failed))
    if unreached:
        fails.append("gpu tests not reached: " + ", ".join(unreached))
    if core_skipped:
        fails.append("core gpu tests skipped (no GPU seen?): " + ", ".join(core_skipped))
lines.append("- gpu tests (one ctest call each; lines above): " + t)
# their figures: the memory plan against what the GPU measured, batch = max and auto for fmnist_cnn
try:
    report = open(os.environ["CT_GPU_REPORT"], errors="replace").read().rstrip("\n")
except (KeyError, OSError):
    report = ""
if report:
    lines.append("- figures of the gpu tests (memory plan against the device, batch search, NCCL; each also "
                 "under the line of its test above):")
    lines.append("")
    lines.append("```")
    lines.extend(report.splitlines())
    lines.append("```")
    lines.append("")

# the training run: the last line of its JSON-lines log
train_rc = int(os.environ.get("CT_TRAIN_RC", "1"))
train_prec = os.environ.get("CT_TRAIN_PREC", "fp16")
last = None
for line in read("train_fmnist_cnn.jsonl").splitlines():
    try:
        d = json.loads(line)
        if isinstance(d, dict):
            last = d
    except ValueError:
        pass
if last is None:
    t = "FAIL: no epoch logged (exit %d)" % train_rc
else:
    acc = last.get("test_accuracy")
    t = "final test accuracy %s (target 0.910), epoch %s/%s, train loss %s, %s img/s" % (
        "%.4f" % acc if num(acc) else "null", last.get("epoch"), last.get("epochs"),
        "%.4f" % last["loss"] if num(last.get("loss")) else "?",
        rate(last["images_per_s"]) if num(last.get("images_per_s")) else "?")
    if num(last.get("loss_scale")):
        t += ", loss scale %g, %s skipped steps" % (last["loss_scale"], last.get("skipped_steps"))
    if last.get("precision") not in (None, train_prec):
        t += " (FAIL: ran %s)" % last.get("precision")
        fails.append("training: ran in %s, not %s" % (last.get("precision"), train_prec))
    full = not os.environ.get("CT_TRAIN_EPOCHS") and last.get("epoch") == last.get("epochs")
    if train_rc == 0 and full and num(acc) and acc < 0.910:
        t += " (FAIL: below the target)"
        fails.append("training %s: test accuracy %.4f below 0.910" % (train_prec, acc))
    if train_rc != 0:
        t = "FAIL (exit %d), %s" % (train_rc, t)
lines.append("- training (models/fmnist_cnn.ini, %s, --devices 0): %s" % (train_prec, t))

# doctor: its exit status, and its verdict line
doctor_rc = int(os.environ.get("CT_DOCTOR_RC", "1"))
dl = [l.strip() for l in read("doctor.txt").splitlines() if l.strip() and not l.startswith("=====")]
pick = [l for l in dl if re.search(r"verdict|overall|summary", l, re.I)]
pick = pick or [l for l in dl if re.search(r"\b(pass|passed|fail|failed|ok)\b", l, re.I)]
pick = pick or dl
v = ("PASS" if doctor_rc == 0 else "FAIL (exit %d)" % doctor_rc)
if pick:
    v += ": " + pick[-1][:200]
lines.append("- doctor: " + v)

# the input pipeline: cutrain training at batch 512 with CPU augmentation vs the PyTorch DataLoader
cp = [r.get("result") for r in recs if r.get("source") == "cutrain-pipeline" and isinstance(r.get("result"), dict)]
pp = [r.get("result") for r in recs if r.get("source") == "pytorch-pipeline" and isinstance(r.get("result"), dict)]
t = []
if cp and num(cp[-1].get("images_per_s")):
    c = cp[-1]
    t.append("cutrain %s img/s at %s GPU, input wait %.1f%% (%s, %s workers)" % (
        rate(c["images_per_s"]), "%.0f%%" % c["gpu_util"] if num(c.get("gpu_util")) else "n/a",
        100 * c.get("input_wait_share", 0), c.get("input_verdict", "?"), c.get("input_workers", "?")))
else:
    t.append("cutrain FAIL")
if pp and num(pp[-1].get("img_s")):
    p = pp[-1]
    t.append("PyTorch DataLoader (8 workers) %s img/s at %s GPU" % (
        rate(p["img_s"]), "%.0f%%" % p["gpu_util"] if num(p.get("gpu_util")) else "n/a"))
else:
    t.append("PyTorch FAIL")
lines.append("- input pipeline (fmnist_cnn fp32, batch 512, crop+flip+normalise on the CPU): " + "; ".join(t))

lines.append("- result: " + ("PASS" if not fails else "FAIL (%d): %s" % (len(fails), "; ".join(fails))))
text = "\n".join(lines) + "\n"
open(os.path.join(out, "summary.md"), "a").write("\n" + text)
sys.stdout.write("\n" + text)
sys.exit(1 if fails else 0)
'

say "device_check: stages done after ${SECONDS}s; logs in $OUT_DIR"
final=0
CT_OUT=$OUT_DIR CT_FAILED=$FAILED_FILE CT_SETTINGS=$SETTINGS CT_PRECISIONS=$PRECISIONS \
    CT_RUNS=$RUNS CT_LEFT_OUT=$LEFT_OUT_FILE CT_PEER_SECONDS=$PEER_SECONDS CT_GPU_TSV=$GPU_TSV \
    CT_TRAIN_PREC=$TRAIN_PREC CT_TRAIN_EPOCHS=${CT_TRAIN_EPOCHS:-} CT_TRAIN_RC=$TRAIN_RC CT_DOCTOR_RC=$DOCTOR_RC \
    CT_GPU_REPORT=$TMP/gpu_report.txt "$PYJ" -c "$TABLE_PY" || final=$?
if ((final != 0)) && [[ ! -s $OUT_DIR/summary.md ]]; then
    echo "device_check: the table could not be made; failed stages:"
    cat "$FAILED_FILE"
fi
[[ -s $OUT_DIR/summary.md ]] && cat "$OUT_DIR/summary.md" >>"$LOG"
exit "$((final != 0 || $(wc -l <"$FAILED_FILE") > 0))"
