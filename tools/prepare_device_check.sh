#!/usr/bin/env bash
# Prepares, on the build machine, what tools/device_check.sh needs on the GPU machine, so that a
# session lent a GPU spends its few minutes of device time on one `run` call:
#   build-gpu/  a CUDA build for sm_90 (the H200) without OpenBLAS (the GPU machine has none; the
#               CPU reference then uses its own matrix product), slimmed to what the check runs
#               (object files and the static library removed) to fit the 64 MiB carried
#   fmnist/     the four Fashion-MNIST .gz files (the GPU machine has no dataset package)
#   peer/       torch_peer.py, the PyTorch side of the benchmarks
# All three are kept out of git through .git/info/exclude. It prints the call to make.
#
#   bash tools/prepare_device_check.sh [PEER_DIR] [FASHION_MNIST_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd -P)
PEER_SRC=${1:-$ROOT/../shared/peer}
DATA_SRC=${2:-/usr/share/datasets/fashion-mnist}
export PATH="/usr/local/cuda/bin:$PATH"

for p in build-gpu fmnist peer; do
    grep -qxF "/$p/" .git/info/exclude 2>/dev/null || echo "/$p/" >>.git/info/exclude
done
mkdir -p fmnist peer
cp "$DATA_SRC"/train-images-idx3-ubyte.gz "$DATA_SRC"/train-labels-idx1-ubyte.gz \
   "$DATA_SRC"/t10k-images-idx3-ubyte.gz "$DATA_SRC"/t10k-labels-idx1-ubyte.gz fmnist/
cp "$PEER_SRC"/*.py peer/

cmake -S . -B build-gpu -G Ninja -DCUTRAIN_CUDA=ON -DCUTRAIN_OPENBLAS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCT_FMNIST_DIR="$ROOT/fmnist"
cmake --build build-gpu
# what the check runs: the command and the gpu-labelled tests (ctest -L gpu); the rest is rebuilt
# there only if this build does not run
find build-gpu -name '*.o' -delete
find build-gpu/tests -maxdepth 1 -type f -name 'test_*' ! -name 'test_gpu_*' -delete
rm -rf build-gpu/libcutrain.a build-gpu/CMakeFiles/3.* build-gpu/CMakeFiles/CheckCUDA

total=$(du -cm build-gpu fmnist peer | tail -n 1 | cut -f 1)
du -sh build-gpu fmnist peer
echo "carried: about ${total} MiB of the 64 MiB allowed"
echo 'run: command="bash tools/device_check.sh fmnist peer", carry=["build-gpu", "fmnist", "peer"], timeout_s=480'
