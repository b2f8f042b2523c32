#!/usr/bin/env bash
# Prepares, on the build machine, what tools/device_check.sh needs on the GPU machine, so that a
# session lent a GPU spends its few minutes of device time on one `run` call:
#   build-gpu/  a CUDA build for sm_90 (the H200) without OpenBLAS (the GPU machine has none; the
#               CPU reference then uses its own matrix product), slimmed to what the check runs
#               (object files and the static library removed) to fit the 64 MiB carried
#   fmnist/     the four Fashion-MNIST .gz files (the GPU machine has no dataset package)
# Both are kept out of git through .git/info/exclude. The PyTorch side of the benchmarks,
# tools/torch_peer.py, travels with the repository. It prints the call to make.
#
#   bash tools/prepare_device_check.sh [FASHION_MNIST_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd -P)
DATA_SRC=${1:-/usr/share/datasets/fashion-mnist}
export PATH="/usr/local/cuda/bin:$PATH"

FILES=(train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz)
for f in "${FILES[@]}"; do
    if [[ ! -s $DATA_SRC/$f ]]; then
        echo "prepare_device_check: no $f in '$DATA_SRC' (usage: $0 [FASHION_MNIST_DIR])" >&2
        exit 2
    fi
done
for p in build-gpu fmnist; do
    grep -qxF "/$p/" .git/info/exclude 2>/dev/null || echo "/$p/" >>.git/info/exclude
done
mkdir -p fmnist
for f in "${FILES[@]}"; do cp "$DATA_SRC/$f" fmnist/; done

cmake -S . -B build-gpu -G Ninja -DCUTRAIN_CUDA=ON -DCUTRAIN_OPENBLAS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCT_FMNIST_DIR="$ROOT/fmnist"
cmake --build build-gpu
# what the check runs: the command and the gpu-labelled tests (ctest -L gpu); the rest is rebuilt
# there only if this build does not run
find build-gpu -name '*.o' -delete
find build-gpu/tests -maxdepth 1 -type f -name 'test_*' ! -name 'test_gpu_*' -delete
rm -rf build-gpu/libcutrain.a build-gpu/CMakeFiles/3.* build-gpu/CMakeFiles/CheckCUDA

total=$(du -cm build-gpu fmnist | tail -n 1 | cut -f 1)
du -sh build-gpu fmnist
echo "carried: about ${total} MiB of the 64 MiB allowed"
echo 'run: command="bash tools/device_check.sh fmnist", carry=["build-gpu", "fmnist"], timeout_s=480'
