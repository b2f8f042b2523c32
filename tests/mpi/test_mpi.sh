#!/usr/bin/env bash
# Several processes under mpirun, on the CPU, with a small Fashion-MNIST MLP (no batch norm):
#   equal    mpirun -np 2 trains to the bits of devices = cpu:2 in one process (checkpoints and the
#            logged loss), and rank 0 alone prints and logs
#   stopped  a process stopped with SIGSTOP mid-run ends the other with cutrain's timeout error
#            naming it, non-zero, within comm_timeout plus a few seconds
#   stalled  a process that never joins (it resumes from a FIFO nobody writes) ends the other
#            likewise
#   killed   a process killed with SIGKILL mid-run: mpirun itself ends the other at once, naming the
#            rank; under mpirun --enable-recovery, which leaves the survivors running, cutrain's
#            timeout error names it within comm_timeout plus a few seconds
#   bad      what one of several processes cannot train is refused, naming the config line
#   disagree ranks that would train differently (another train_limit, seed, optimizer, epochs, or
#            checkpoint resumed from) are refused at the join with exit 2 naming the key and both
#            values, no crash; keys that may differ per process (threads) and the same value
#            written another way (learning_rate 1e-3 and 0.001) train together
#   sizes    two processes out of step, each sending a message of another size than the other
#            expects: both get an error naming the sizes, nothing written past a buffer
#            (tests/mpi/world_sizes.c)
#   no_mpi   a build without MPI refuses to run as one of several processes (skipped with MPI)
# Usage: test_mpi.sh CASE   (environment: CT_CLI, CT_FMNIST_DIR, CT_WITH_MPI=ON|OFF, CT_MPIEXEC)
set -uo pipefail
case=${1:?usage: test_mpi.sh equal|stopped|stalled|killed|bad|disagree|sizes|no_mpi}
cli=${CT_CLI:?CT_CLI names the cutrain command}
fmnist=${CT_FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
with_mpi=${CT_WITH_MPI:-OFF}
mpiexec=${CT_MPIEXEC:-$(command -v mpirun || true)}
timeout_s=3

if [ "$case" = no_mpi ]; then
    [ "$with_mpi" = ON ] && { echo "skipped: this build has MPI"; exit 77; }
elif [ "$with_mpi" != ON ]; then
    echo "skipped: this build has no MPI (configure with -DCUTRAIN_MPI=ON)"
    exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/cutrain-mpi.XXXXXX")
stopped_pid=
cleanup() {
    [ -n "$stopped_pid" ] && kill -KILL "$stopped_pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
cd "$tmp" || exit 1
fail() { echo "FAIL: $*"; for f in *.out *.err; do [ -f "$f" ] && { echo "--- $f"; tail -n 20 "$f"; }; done; exit 1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

# Open MPI refuses root without --allow-run-as-root; the tests run as root in CI, on 2 cores
launcher=("$mpiexec")
if "$mpiexec" --allow-run-as-root --version 2>/dev/null | grep -qE "Open MPI|OpenRTE"; then
    launcher+=(--allow-run-as-root --oversubscribe)
fi

# one OpenMP thread per replica in both runs: the products' split over threads must match
write_config() { # epochs
    cat > "net.ini" <<INI
[data]
format = idx
train = $fmnist/train-images-idx3-ubyte.gz
train_labels = $fmnist/train-labels-idx1-ubyte.gz
test = $fmnist/t10k-images-idx3-ubyte.gz
test_labels = $fmnist/t10k-labels-idx1-ubyte.gz
normalize = 0.2860, 0.3530
train_limit = 1024
test_limit = 256

[train]
epochs = $1
batch = 64
optimizer = adam
learning_rate = 0.001
devices = cpu
threads = 1
comm_timeout = $timeout_s

[flat]
type = flatten

[fc1]
type = dense
units = 64
activation = relu

[out]
type = dense
units = 10
INI
}

case $case in
equal)
    write_config 2
    "$cli" train --config net.ini --devices cpu:2 --checkpoint one --log one.jsonl -q > one.out 2> one.err ||
        fail "devices = cpu:2 in one process failed"
    "${launcher[@]}" -np 2 "$cli" train --config net.ini --checkpoint two --log two.jsonl -q > two.out 2> two.err ||
        fail "mpirun -np 2 failed"
    for f in one/*.ckpt; do
        [ -f "two/${f#one/}" ] || fail "mpirun -np 2 saved no ${f#one/}"
        cmp "$f" "two/${f#one/}" || fail "${f#one/} differs between mpirun -np 2 and devices = cpu:2"
    done
    [ "$(ls one | wc -l)" -ge 2 ] || fail "too few checkpoints to compare: $(ls one)"
    figures() { grep -o '"loss": [^,]*, "train_accuracy": [^,]*, "test_loss": [^,]*, "test_accuracy": [^,]*' "$1"; }
    [ "$(wc -l < two.jsonl)" -eq 2 ] || fail "the log has $(wc -l < two.jsonl) lines for 2 epochs: rank 0 alone logs"
    [ "$(figures one.jsonl)" = "$(figures two.jsonl)" ] ||
        fail "the logged figures differ: $(figures one.jsonl) against $(figures two.jsonl)"
    [ "$(grep -c '^epoch 2/2:' two.out)" -eq 1 ] || fail "the final epoch line is not printed once (rank 0 alone prints)"
    grep -q . two.err && fail "mpirun -np 2 wrote to stderr"
    echo "mpirun -np 2 = devices = cpu:2: $(ls one | wc -l) checkpoints bit for bit, figures $(figures two.jsonl | tail -n 1)"
    ;;
stopped)
    write_config 1000
    # the second program records its pid before it becomes cutrain, so it can be stopped
    "${launcher[@]}" -np 1 "$cli" train --config net.ini --log run.jsonl -q : \
        -np 1 sh -c 'echo $$ > rank1.pid; exec "$0" train --config net.ini -q' "$cli" > run.out 2> run.err &
    launcher_pid=$!
    for _ in $(seq 600); do # until an epoch has been logged: both ranks are training
        [ -s run.jsonl ] && [ -s rank1.pid ] && break
        kill -0 "$launcher_pid" 2>/dev/null || fail "the run ended before it could be stopped"
        sleep 0.1
    done
    [ -s run.jsonl ] || fail "no epoch ended within 60 s"
    stopped_pid=$(cat rank1.pid)
    kill -STOP "$stopped_pid"
    stopped=$(now)
    wait "$launcher_pid"
    rc=$?
    took=$(elapsed "$stopped" "$(now)")
    [ "$rc" -ne 0 ] || fail "mpirun exited 0 with rank 1 stopped"
    grep -q "rank 0 waited more than comm_timeout = $timeout_s s for rank 1 in " run.err ||
        fail "no timeout error naming rank 1"
    awk -v t="$took" -v c="$timeout_s" 'BEGIN { exit !(t >= c - 0.5 && t <= c + 10) }' ||
        fail "ended ${took} s after the stop; comm_timeout is $timeout_s s"
    echo "stopped rank 1: mpirun exited $rc ${took} s after SIGSTOP (comm_timeout = $timeout_s s): $(grep -m1 'waited more' run.err)"
    ;;
killed)
    write_config 1000
    # run_and_kill NAME [mpirun options]: rank 1 killed once an epoch is logged; sets rc and took
    run_and_kill() {
        local name=$1
        shift
        rm -f rank1.pid "$name.jsonl"
        "${launcher[@]}" "$@" -np 1 "$cli" train --config net.ini --log "$name.jsonl" -q : \
            -np 1 sh -c 'echo $$ > rank1.pid; exec "$0" train --config net.ini -q' "$cli" > "$name.out" 2> "$name.err" &
        local launcher_pid=$!
        for _ in $(seq 600); do
            [ -s "$name.jsonl" ] && [ -s rank1.pid ] && break
            kill -0 "$launcher_pid" 2>/dev/null || fail "$name: the run ended before rank 1 could be killed"
            sleep 0.1
        done
        [ -s "$name.jsonl" ] || fail "$name: no epoch ended within 60 s"
        kill -KILL "$(cat rank1.pid)"
        local killed_at
        killed_at=$(now)
        wait "$launcher_pid"
        rc=$?
        took=$(elapsed "$killed_at" "$(now)")
        awk -v t="$took" -v c="$timeout_s" 'BEGIN { exit !(t <= c + 10) }' ||
            fail "$name: ended ${took} s after the kill; comm_timeout is $timeout_s s"
    }
    run_and_kill plain
    [ "$rc" -ne 0 ] || fail "mpirun exited 0 with rank 1 killed"
    grep -q "process rank 1 .*exited on signal 9" plain.err || fail "mpirun did not name rank 1"
    plain="mpirun exited $rc ${took} s after SIGKILL, naming rank 1"
    run_and_kill recovery --enable-recovery
    grep -q "rank 0 waited more than comm_timeout = $timeout_s s for rank 1 in " recovery.err ||
        fail "under --enable-recovery, no timeout error naming rank 1"
    echo "killed rank 1: $plain; with --enable-recovery cutrain ended rank 0 ${took} s after: $(grep -m1 'waited more' recovery.err)"
    ;;
stalled)
    write_config 2
    mkfifo never-written
    started=$(now)
    "${launcher[@]}" -np 1 "$cli" train --config net.ini -q : \
        -np 1 "$cli" train --config net.ini -q --resume "$tmp/never-written" > run.out 2> run.err
    rc=$?
    took=$(elapsed "$started" "$(now)")
    [ "$rc" -ne 0 ] || fail "mpirun exited 0 with rank 1 never joining"
    grep -q "rank 0 waited more than comm_timeout = $timeout_s s for rank 1 in the join" run.err ||
        fail "no timeout error naming rank 1 in the join"
    awk -v t="$took" -v c="$timeout_s" 'BEGIN { exit !(t <= c + 30) }' || fail "took ${took} s in all"
    echo "rank 1 never joined: mpirun exited $rc after ${took} s in all: $(grep -m1 'waited more' run.err)"
    ;;
bad)
    write_config 2
    sed 's/^devices = cpu$/devices = cpu:2/' net.ini > cpu2.ini
    "${launcher[@]}" -np 2 "$cli" train --config cpu2.ini -q > run.out 2> run.err && fail "cpu:2 in each of 2 processes ran"
    line=$(grep -n '^devices' cpu2.ini | cut -d: -f1)
    grep -q "cpu2.ini:$line: devices = cpu:2 in one of 2 processes" run.err || fail "cpu:2 is not refused at its line"
    sed 's/^batch = 64$/batch = 63/' net.ini > odd.ini
    "${launcher[@]}" -np 2 "$cli" train --config odd.ini -q > run.out 2> run.err && fail "batch 63 over 2 processes ran"
    grep -q "batch = 63 does not split evenly over 2 processes" run.err || fail "batch 63 is not refused"
    echo "refused devices = cpu:2 and batch = 63 in 2 processes, naming their lines"
    ;;
disagree)
    write_config 1
    # refused LABEL KEY SHOWN0 SHOWN1 [rank 1's options...]: rank 1 differs from rank 0 in KEY
    refused() {
        local label=$1 key=$2 v0=$3 v1=$4
        shift 4
        "${launcher[@]}" -np 1 "$cli" train --config net.ini -q : -np 1 "$cli" train --config net.ini -q "$@" \
            > "$label.out" 2> "$label.err"
        local rc=$?
        [ "$rc" -eq 2 ] || fail "$label: mpirun exited $rc, expected 2 (refused at the join)"
        grep -q "the processes disagree on $key: rank 0 has $v0, rank 1 has $v1" "$label.err" ||
            fail "$label: no refusal naming $key ($v0 against $v1)"
        grep -qE "free\(\)|signal|Segmentation|corrupt" "$label.err" && fail "$label: a process crashed"
        grep -q "^epoch" "$label.out" && fail "$label: an epoch trained"
        tried=$((tried + 1))
    }
    tried=0
    refused limit data.train_limit 1024 512 --set data.train_limit=512
    refused seed train.seed 42 7 --set train.seed=7
    refused optimizer train.optimizer adam sgd --set train.optimizer=sgd
    refused rate train.learning_rate 0.00100000005 0.00999999978 --set train.learning_rate=0.01
    refused epochs train.epochs 1 2 --set train.epochs=2
    # the data's content, whatever the paths: rank 1 reads the test set as its training set
    refused data "the training set's checksum" "images crc32c [0-9a-f]*, labels crc32c [0-9a-f]*" \
        "images crc32c [0-9a-f]*, labels crc32c [0-9a-f]*" \
        --set data.train="$fmnist/t10k-images-idx3-ubyte.gz" --set data.train_labels="$fmnist/t10k-labels-idx1-ubyte.gz"
    # what may differ per process, and one value written two ways, train together; rank 0 saves
    "${launcher[@]}" -np 1 "$cli" train --config net.ini -q --checkpoint ck : \
        -np 1 "$cli" train --config net.ini -q --set train.threads=2 --set train.learning_rate=1e-3 > same.out 2> same.err ||
        fail "ranks that differ only in threads and in how learning_rate is written did not train"
    # the checkpoint resumed from is compared: one rank resumes, the other starts fresh
    "${launcher[@]}" -np 1 "$cli" train --config net.ini -q --set train.epochs=2 --resume ck : \
        -np 1 "$cli" train --config net.ini -q --set train.epochs=2 > resume.out 2> resume.err
    rc=$?
    [ "$rc" -eq 2 ] && grep -q "the processes disagree on the checkpoint resumed from: rank 0 has step 16" resume.err ||
        fail "one rank resuming and the other not: exit $rc, not refused at the join"
    tried=$((tried + 1))
    "${launcher[@]}" -np 2 "$cli" train --config net.ini -q --set train.epochs=2 --resume ck > both.out 2> both.err ||
        fail "both ranks resuming from one checkpoint did not train"
    grep -q "^epoch 2/2" both.out || fail "both ranks resuming: no second epoch printed"
    echo "refused $tried disagreements at the join with exit 2, e.g. $(grep -m1 'disagree' limit.err)"
    ;;
sizes)
    # each rank ends at once after its checks (_Exit: a broken world's requests stay pending), which
    # mpirun reports as an improper exit: the verdict is what both ranks printed
    "${launcher[@]}" -np 2 "${CT_WORLD_SIZES:?CT_WORLD_SIZES names tests/mpi/world_sizes.c built}" > run.out 2> run.err
    [ "$(grep -c 'refused, guard intact' run.out)" -eq 2 ] && ! grep -q FAILED run.out ||
        fail "a message of another size than expected was not refused on both ranks: $(cat run.out run.err)"
    echo "out of step: both ranks refused the other's message of another size, guards intact"
    ;;
no_mpi)
    write_config 2
    if [ -n "$mpiexec" ]; then
        "${launcher[@]}" -np 2 "$cli" train --config net.ini --checkpoint ck -q > run.out 2> run.err
        rc=$?
    else # what mpirun tells its processes
        OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 "$cli" train --config net.ini --checkpoint ck -q > run.out 2> run.err
        rc=$?
    fi
    [ "$rc" -ne 0 ] || fail "a build without MPI trained as one of 2 processes"
    grep -q "built without MPI" run.err || fail "the refusal does not say the build has no MPI"
    [ -e ck ] && fail "a refused run saved checkpoints"
    echo "refused (exit $rc): $(grep -m1 'without MPI' run.err)"
    ;;
*)
    echo "unknown case $case"; exit 2 ;;
esac
exit 0
