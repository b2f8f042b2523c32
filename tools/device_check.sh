#!/usr/bin/env bash
# The one prepared script for a GPU machine (README.md, "On the GPU"): about five minutes on one
# H200. Run from the repository root:
#
#   bash tools/device_check.sh [FMNIST_DIR [PEER_DIR]]
#
# 1. uses the build in $CT_BUILD (default build-gpu) when it holds a runnable cutrain, else
#    configures and builds one there (CUDA on, sm_90, Ninja);
# 2. records `nvidia-smi -q` and `cutrain doctor`, runs the gpu-labelled tests, trains
#    models/fmnist_cnn.ini on the GPU;
# 3. benchmarks cutrain and PyTorch (PEER_DIR/torch_peer.py) side by side, fp32, same model, batch,
#    data and optimizer (SGD momentum 0.9, lr 0.01); then fmnist_cnn at batch 512 fed by the CPU
#    input pipeline (crop+flip) against PyTorch's DataLoader with 8 workers, with GPU utilization;
# 4. writes full logs to $OUT (else ./device_check_out) and prints a Markdown table last.
# Every stage runs under `timeout` and later stages run whatever happened before; the exit status
# is non-zero when any stage failed.
#
# Arguments and variables:
#   FMNIST_DIR / $CT_FMNIST_DIR  the four Fashion-MNIST .gz files (default fmnist, falling back to
#                                /usr/share/datasets/fashion-mnist)
#   PEER_DIR / $CT_PEER_DIR      holds torch_peer.py (default tools, this repository's own; also
#                                used when the folder named has none)
#   $CT_PYTHON                   Python with PyTorch (default /opt/torch/.venv/bin/python, else python3)
#   $CT_BUILD                    build folder (default build-gpu)
#   $CT_EXTRA_LIB_DIR            a folder of extra shared libraries put first on LD_LIBRARY_PATH
#                                (default devlibs, when present)
#   $CT_BENCH_SETTINGS           "model:batch:steps ..." (default: the five settings below)
#   $CT_BENCH_RUNS               cutrain bench runs per setting: 2, 3, or auto (3 when time allows)
#   $CT_TRAIN_EPOCHS             override train.epochs of the training run (default: the config's)
#   $CT_DEADLINE_S               stages that would end later than this many seconds after the start
#                                are cut short or skipped, so the table always prints (default 420)
# Files under $OUT (the device tool brings back at most 8): device_check.log (everything that has
# no file of its own), nvidia-smi.txt, doctor.txt, ctest.log, train_fmnist_cnn.jsonl, bench.jsonl
# (one line per benchmark run: source, model, batch, run, exit status, and the program's JSON line
# verbatim as "result"), summary.md (the table).
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
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
FAILED_FILE=$TMP/failed.txt
: >"$FAILED_FILE"
DEADLINE=${CT_DEADLINE_S:-420}

T_BUILD=${CT_T_BUILD:-300}
T_DOCTOR=${CT_T_DOCTOR:-90}
T_CTEST=${CT_T_CTEST:-150}
T_TRAIN=${CT_T_TRAIN:-150}
T_BENCH=${CT_T_BENCH:-60}
T_PEER=${CT_T_PEER:-120}

say() { printf '%s\n' "$*" | tee -a "$LOG"; }

stage_failed() {
    say "[FAIL] $1: $2"
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
    nvidia-smi 2>&1 || echo "nvidia-smi: failed"
} >>"$LOG" 2>&1
say "device_check: data $DATA, peer $PEER, out $OUT_DIR"

# ---- 1. build --------------------------------------------------------------------------------
BUILD=${CT_BUILD:-build-gpu}
[[ $BUILD == /* ]] || BUILD=$ROOT/$BUILD

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
# over ours): reconfigure (no rebuild) to point it at $DATA.
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
    if [[ -n $fm && $fm != "$DATA" ]] && have_fmnist "$DATA"; then
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
    run_stage "configure" 120 "$LOG" cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCUTRAIN_CUDA=ON \
        -DCMAKE_CUDA_ARCHITECTURES=90 -DCT_FMNIST_DIR="$DATA"
    if ((STAGE_RC == 0)); then
        run_stage "build" "$T_BUILD" "$LOG" cmake --build "$BUILD"
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

# ---- 2. snapshot, doctor, gpu tests, one training run -----------------------------------------
run_stage "nvidia-smi -q" 30 "$OUT_DIR/nvidia-smi.txt" nvidia-smi -q

cutrain_stage "doctor" "$T_DOCTOR" "$OUT_DIR/doctor.txt" doctor
DOCTOR_RC=$STAGE_RC

if ((BIN_OK)); then
    run_stage "gpu tests" "$T_CTEST" "$OUT_DIR/ctest.log" env CT_FMNIST_DIR="$DATA" \
        ctest --test-dir "$BUILD" -L gpu --output-on-failure --timeout "$((T_CTEST - 10))"
    CTEST_RC=$STAGE_RC
else
    stage_failed "gpu tests" "skipped, no cutrain build"
    CTEST_RC=126
fi

train_args=(--config models/fmnist_cnn.ini --devices 0 "${DATA_SETS[@]}")
[[ -n ${CT_TRAIN_EPOCHS:-} ]] && train_args+=(--set "train.epochs=$CT_TRAIN_EPOCHS")
cutrain_stage "train fmnist_cnn" "$T_TRAIN" "$LOG" "${train_args[@]}" \
    --log "$OUT_DIR/train_fmnist_cnn.jsonl"
TRAIN_RC=$STAGE_RC

# ---- 3. benchmarks, side by side ---------------------------------------------------------------
SETTINGS=${CT_BENCH_SETTINGS:-"fmnist_cnn:256:500 fmnist_cnn:2048:200 fmnist_cnn:16384:40 fmnist_mlp_wide:4096:300 cifar_resnet18:512:30"}
RUNS=${CT_BENCH_RUNS:-auto}
read -r -a settings <<<"$SETTINGS"
OPT_SETS=(--set train.optimizer=momentum --set train.learning_rate=0.01 --set train.momentum=0.9)

# record SOURCE MODEL BATCH RUN RC [JSON]: one line of bench.jsonl, the JSON embedded verbatim.
record() {
    printf '{"source": "%s", "model": "%s", "batch": %s, "run": %s, "rc": %s, "result": %s}\n' \
        "$1" "$2" "$3" "$4" "$5" "${6:-null}" >>"$OUT_DIR/bench.jsonl"
}

# bench_one SOURCE NAME MODEL BATCH RUN COMMAND...: runs one benchmark, records its JSON line.
bench_one() {
    local src=$1 name=$2 model=$3 batch=$4 run=$5 line=""
    shift 5
    local so=$TMP/bench.out
    : >"$so"
    if [[ $src == cutrain ]]; then
        cutrain_stage --stdout "$so" "$name" "$T_BENCH" "$LOG" "$@"
    else
        run_stage --stdout "$so" "$name" "$T_PEER" "$LOG" "$@"
    fi
    if ((STAGE_RC == 0)); then
        if line=$(json_line "$so"); then
            say "      $line"
        else
            line=""
            stage_failed "$name" "no JSON line in its output"
        fi
    fi
    record "$src" "$model" "$batch" "$run" "$STAGE_RC" "$line"
    [[ -n $line ]]
}

n=${#settings[@]}
for i in "${!settings[@]}"; do
    IFS=: read -r model batch steps <<<"${settings[i]}"
    dsets=()
    [[ $model == cifar* ]] || dsets=("${DATA_SETS[@]}")
    runs=2
    [[ $RUNS =~ ^[0-9]+$ ]] && runs=$RUNS
    ok=0
    r=1
    while ((r <= runs)); do
        t0=$SECONDS
        if bench_one cutrain "bench cutrain $model b$batch run $r" "$model" "$batch" "$r" \
            bench --config "models/$model.ini" --batch "$batch" --steps "$steps" \
            ${dsets[@]+"${dsets[@]}"} "${OPT_SETS[@]}"; then
            ok=$((ok + 1))
        fi
        last=$((SECONDS - t0))
        # a third run (the median of 3, engine/README.md's performance protocol) when the rest
        # still fits the budget
        if [[ $RUNS == auto ]] && ((r == 2 && ok > 0)) &&
            ((SECONDS + last + (n - i - 1) * (2 * last + 15) < DEADLINE - 60)); then
            runs=3
        fi
        r=$((r + 1))
    done
    if [[ -f $PEER/torch_peer.py ]]; then
        bench_one pytorch "bench pytorch $model b$batch" "$model" "$batch" 1 \
            env PYTHONUNBUFFERED=1 "$PY" "$PEER/torch_peer.py" --model "$model" --batch "$batch" \
            --precision fp32 --data "$DATA" --seconds 3 || true
    else
        stage_failed "bench pytorch $model b$batch" "skipped, no torch_peer.py"
        record pytorch "$model" "$batch" 1 126
    fi
done

# ---- 3b. the input pipeline feeding the GPU ----------------------------------------------------
# fmnist_cnn fp32 at batch 512 with crop+flip+normalise on the CPU workers, the usual per-sample
# setup, against PyTorch's DataLoader with 8 workers; GPU utilization sampled by nvidia-smi.
# gpu_util_mean FILE: the mean of nvidia-smi's samples after the first two seconds (start-up).
gpu_util_mean() {
    "$PYJ" -c 'import sys
v = [float(l) for l in open(sys.argv[1]) if l.strip().replace(".", "", 1).isdigit()]
v = v[20:] or v
print("%.1f" % (sum(v) / len(v)) if v else "null")' "$1" 2>/dev/null || echo null
}
PIPE_SETS=(--set train.batch=512 --set train.epochs=3 --set "data.augment=crop:2, flip" "${OPT_SETS[@]}")
if ((BIN_OK)) && command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 100 >"$TMP/util.txt" 2>/dev/null &
    smi=$!
    cutrain_stage "pipeline cutrain fmnist_cnn b512" "$T_TRAIN" "$LOG" --config models/fmnist_cnn.ini \
        --devices 0 "${DATA_SETS[@]}" "${PIPE_SETS[@]}" --log "$TMP/pipeline.jsonl"
    prc=$STAGE_RC
    kill "$smi" 2>/dev/null || true
    wait "$smi" 2>/dev/null || true
    util=$(gpu_util_mean "$TMP/util.txt")
    line=$(json_line "$TMP/pipeline.jsonl" 2>/dev/null || echo "")
    say "      pipeline: $line, mean GPU util $util"
    record cutrain-pipeline fmnist_cnn 512 1 "$prc" \
        "$("$PYJ" -c 'import json, sys
d = json.loads(sys.argv[1]) if sys.argv[1] else {}
d["gpu_util"] = None if sys.argv[2] == "null" else float(sys.argv[2])
print(json.dumps(d))' "$line" "$util" 2>/dev/null || echo null)"
else
    stage_failed "pipeline cutrain fmnist_cnn b512" "skipped, no cutrain build or no nvidia-smi"
fi
if [[ -f $PEER/torch_peer.py ]]; then
    bench_one pytorch-pipeline "pipeline pytorch fmnist_cnn b512 (8 workers)" fmnist_cnn 512 1 \
        env PYTHONUNBUFFERED=1 "$PY" "$PEER/torch_peer.py" --model fmnist_cnn --batch 512 --pipeline 8 \
        --precision fp32 --data "$DATA" --seconds 5 || true
fi

# ---- 4. the table ------------------------------------------------------------------------------
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

lines = ["## cutrain vs PyTorch on %s, fp32, training images/s" % gpu, "",
         "Same model, batch, data and optimizer (SGD, momentum 0.9, lr 0.01), data on the GPU. "
         "fp32 on both sides, but PyTorch fp32 convolutions may use TF32 (cuDNN default, "
         "`torch.backends.cudnn.allow_tf32 = True`) while its matrix products do not "
         "(`torch.backends.cuda.matmul.allow_tf32 = False`); cutrain does the same by default.", "",
         "| model | batch | cutrain img/s | PyTorch img/s | ratio | cutrain ms/step | PyTorch GPU util | cutrain backend |",
         "| --- | --- | --- | --- | --- | --- | --- | --- |"]
methods = set()
for s in os.environ.get("CT_SETTINGS", "").split():
    model, batch, _steps = s.split(":")
    batch = int(batch)
    mine = [r for r in recs if r.get("model") == model and r.get("batch") == batch]
    cr = [r["result"] for r in mine if r.get("source") == "cutrain" and isinstance(r.get("result"), dict)
          and num(r["result"].get("images_per_s"))]
    pr = [r["result"] for r in mine if r.get("source") == "pytorch" and isinstance(r.get("result"), dict)
          and num(r["result"].get("img_s"))]
    c = p = None
    if cr:
        cr.sort(key=lambda d: d["images_per_s"])
        if len(cr) % 2 == 1 and len(cr) >= 3:
            c = cr[len(cr) // 2]
            methods.add("median of %d" % len(cr))
        else:
            c = cr[-1]
            methods.add("best of %d" % len(cr))
    if pr:
        p = pr[-1]
    backend = "FAIL"
    if c:
        b = str(c.get("backend", "?"))
        g = c.get("graph")
        backend = b + (", graph" if g else (", no graph" if g is not None else ""))
        if b.lower() == "cpu":
            backend += " (FAIL: not the GPU)"
            fails.append("bench cutrain %s b%d: ran on the CPU backend" % (model, batch))
    ms = c.get("ms_per_step") if c else None
    util = p.get("gpu_util") if p else None
    lines.append("| %s | %d | %s | %s | %s | %s | %s | %s |" % (
        model, batch,
        rate(c["images_per_s"]) if c else "FAIL",
        rate(p["img_s"]) if p else "FAIL",
        "%.2fx" % (c["images_per_s"] / p["img_s"]) if c and p and p["img_s"] > 0 else "-",
        "%.3f" % ms if num(ms) else ("-" if c else "FAIL"),
        "%.0f%%" % util if num(util) else ("n/a" if p else "FAIL"),
        backend))
lines.append("")
lines.append("cutrain: `cutrain bench` (%s per setting; its own warm-up and CUDA-event timing); "
             "PyTorch: `torch_peer.py --seconds 3`, one timed window after 15 warm-up steps. "
             "Raw JSON lines: bench.jsonl." % (", ".join(sorted(methods)) or "no run"))
lines.append("")

# gpu tests: ctest summary
ctest_rc = int(os.environ.get("CT_CTEST_RC", "1"))
txt = read("ctest.log")
m = re.findall(r"(\d+)% tests passed, (\d+) tests? failed out of (\d+)", txt)
skipped = len(re.findall(r"\(Skipped\)\s*$", txt, re.M))
if m:
    failed, total = int(m[-1][1]), int(m[-1][2])
    passed = total - failed - skipped
    ok = ctest_rc == 0 and failed == 0 and skipped == 0 and total > 0
    t = "%s: %d passed, %d failed, %d skipped, of %d" % ("PASS" if ok else "FAIL", passed, failed, skipped, total)
    if not ok and ctest_rc == 0:
        fails.append("gpu tests: " + ("none ran" if total == 0 else "%d skipped (no GPU seen?)" % skipped))
elif "No tests were found" in txt:
    t = "FAIL: no test carries the gpu label"
    fails.append("gpu tests: none found")
else:
    t = "FAIL: no ctest summary (exit %d)" % ctest_rc
    if ctest_rc == 0:
        fails.append("gpu tests: no ctest summary")
lines.append("- gpu tests (`ctest -L gpu`): " + t)

# the training run: the last line of its JSON-lines log
train_rc = int(os.environ.get("CT_TRAIN_RC", "1"))
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
    if train_rc != 0:
        t = "FAIL (exit %d), %s" % (train_rc, t)
lines.append("- training (models/fmnist_cnn.ini, --devices 0): " + t)

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
open(os.path.join(out, "summary.md"), "w").write(text)
sys.stdout.write("\n" + text)
sys.exit(1 if fails else 0)
'

say "device_check: stages done after ${SECONDS}s; logs in $OUT_DIR"
final=0
CT_OUT=$OUT_DIR CT_FAILED=$FAILED_FILE CT_SETTINGS=$SETTINGS CT_CTEST_RC=$CTEST_RC \
    CT_TRAIN_RC=$TRAIN_RC CT_DOCTOR_RC=$DOCTOR_RC "$PYJ" -c "$TABLE_PY" || final=$?
if ((final != 0)) && [[ ! -s $OUT_DIR/summary.md ]]; then
    echo "device_check: the table could not be made; failed stages:"
    cat "$FAILED_FILE"
fi
[[ -s $OUT_DIR/summary.md ]] && cat "$OUT_DIR/summary.md" >>"$LOG"
exit "$((final != 0 || $(wc -l <"$FAILED_FILE") > 0))"
