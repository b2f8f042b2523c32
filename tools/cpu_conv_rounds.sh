#!/usr/bin/env bash
# Same-run alternating rounds of `cutrain bench` against PyTorch on the CPU (2 threads each, SGD with
# momentum 0.9 and lr 0.01 on random batches of the real Fashion-MNIST, as tools/torch_cpu_peer.py's
# speed() measures), printing each round's images/s and ratio, then the range of the ratios. Extra
# build folders are measured in the same rounds (e.g. one configured with -DCUTRAIN_ONEDNN=OFF).
#
#   tools/cpu_conv_rounds.sh ROUNDS MODEL BATCH BUILD_DIR...
#   tools/cpu_conv_rounds.sh 5 fmnist_cnn 256 build build-noonednn
#   tools/cpu_conv_rounds.sh 5 fmnist_convnet 64 build
#
# MODEL: fmnist_mlp, fmnist_cnn or fmnist_convnet (models/MODEL.ini and the same network in
# PyTorch). Needs Debian's PyTorch (apt-get install python3-torch) and dataset-fashion-mnist.
set -euo pipefail
cd "$(dirname "$0")/.."
if (($# < 4)); then
    echo "usage: $0 ROUNDS MODEL BATCH BUILD..." >&2
    exit 2
fi
rounds=$1 model=$2 batch=$3
shift 3
data=${CT_FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
seconds=6
torch_speed() {
    /usr/bin/python3 - "$model" "$batch" "$seconds" "$data" <<'PY'
import gzip, sys, time
import numpy as np, torch, torch.nn as nn, torch.nn.functional as F
torch.set_num_threads(2); torch.manual_seed(0)
name, batch, secs, D = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
def idx(p):
    b = gzip.open(p).read(); nd = b[3]
    dims = [int.from_bytes(b[4+4*i:8+4*i], "big") for i in range(nd)]
    return np.frombuffer(b, np.uint8, offset=4+4*nd).reshape(dims)
X = torch.tensor(idx(f"{D}/train-images-idx3-ubyte.gz")).float().div(255).sub(0.286).div(0.353).unsqueeze(1)
Y = torch.tensor(idx(f"{D}/train-labels-idx1-ubyte.gz")).long()
nets = {
    "fmnist_mlp": lambda: nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                                        nn.Linear(128, 100), nn.ReLU(), nn.Linear(100, 10)),
    "fmnist_cnn": lambda: nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3), nn.ReLU(),
                                        nn.MaxPool2d(2), nn.Flatten(), nn.Linear(1600, 128), nn.ReLU(), nn.Linear(128, 10)),
    "fmnist_convnet": lambda: nn.Sequential(nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                                            nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                                            nn.Linear(3136, 1024), nn.ReLU(), nn.Dropout(0.4), nn.Linear(1024, 10)),
}
m = nets[name](); opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
def step():
    i = torch.randint(0, 60000, (batch,)); loss = F.cross_entropy(m(X[i]), Y[i])
    opt.zero_grad(); loss.backward(); opt.step()
for _ in range(3):
    step()
n, t0 = 0, time.time()
while time.time() - t0 < secs:
    step(); n += 1
print(round(n * batch / (time.time() - t0)))
PY
}
cutrain_speed() {
    OMP_NUM_THREADS=2 "$1/cutrain" bench -c "models/$model.ini" --devices cpu --batch "$batch" --warmup 3 \
        --steps $((seconds * 40000 / batch / 10)) --set train.optimizer=momentum --set train.learning_rate=0.01 |
        tail -1 | /usr/bin/python3 -c 'import json, sys; print(json.loads(sys.stdin.read())["images_per_s"])'
}
declare -A ratios
for r in $(seq 1 "$rounds"); do
    t=$(torch_speed)
    line="round $r, $model batch $batch: pytorch $t images/s"
    for b in "$@"; do
        c=$(cutrain_speed "$b")
        ratio=$(/usr/bin/python3 -c "print(f'{$c / $t:.2f}')")
        ratios[$b]="${ratios[$b]:-} $ratio"
        line="$line, $b $c ($ratio x)"
    done
    echo "$line"
done
for b in "$@"; do
    /usr/bin/python3 -c "import sys; v = sorted(map(float, sys.argv[2:])); print(f'{sys.argv[1]}: {len(v)} rounds, ratio {v[0]:.2f} to {v[-1]:.2f}x, median {v[len(v) // 2]:.2f}x')" "$b" ${ratios[$b]}
done
