#!/usr/bin/env bash
# Prepares, on the build machine, what tools/device_check.sh needs on the GPU machine, so that a
# session lent a GPU spends its few minutes of device time on one `run` call:
#   build-gpu/        a CUDA build for sm_90 (the H200) of the command and the gpu tests alone
#                     (target device_check_binaries), kept here for rebuilding
#   build-gpu.tar.xz  that build packed, without its object files: about 2.5 MB for the 70 MB of
#                     binaries, which share most of their code (xz's window spans them all), so it
#                     fits the 64 MiB a device call carries; device_check.sh unpacks it there
#   fmnist/           the four Fashion-MNIST .gz files (the GPU machine has no dataset package)
#   nvjpeg/           libnvjpeg.so.13 from PyPI's nvidia-nvjpeg wheel, when pip can download it
#                     (optional: decode = gpu loads it with dlopen, and the GPU machine's Python may
#                     lack it; device_check.sh puts the folder on LD_LIBRARY_PATH)
# All four are kept out of git through the checkout's info/exclude. The PyTorch side of the benchmarks,
# tools/torch_peer.py, travels with the repository. It prints the call to make.
#
# The GPU machine (Ubuntu 24.04) has the CUDA toolkit, cuDNN and NCCL but none of the optional
# libraries a build machine may have (OpenBLAS, oneDNN, Open MPI): the build leaves every one of them out,
# and the script ends by checking with ldd that the command and every gpu test need nothing outside
# the list below, failing (exit 1) on anything else, so that a new dependency cannot break the
# device run unseen. CI runs this script.
#
#   bash tools/prepare_device_check.sh [FASHION_MNIST_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd -P)
DATA_SRC=${1:-/usr/share/datasets/fashion-mnist}
export PATH="/usr/local/cuda/bin:$PATH"
BUILD=build-gpu

FILES=(train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz)
for f in "${FILES[@]}"; do
    if [[ ! -s $DATA_SRC/$f ]]; then
        echo "prepare_device_check: no $f in '$DATA_SRC' (usage: $0 [FASHION_MNIST_DIR])" >&2
        exit 2
    fi
done
# A clone may lack .git/info (some clone tools leave it out), or be a worktree whose .git is a file,
# or not be a git checkout at all: ask git where the exclude file lives and make its folder.
if exclude=$(git rev-parse --git-path info/exclude 2>/dev/null); then
    mkdir -p "$(dirname "$exclude")"
    for p in /$BUILD/ /$BUILD.tar.xz /fmnist/ /nvjpeg/; do
        grep -qxF "$p" "$exclude" 2>/dev/null || echo "$p" >>"$exclude"
    done
fi
mkdir -p fmnist
for f in "${FILES[@]}"; do cp "$DATA_SRC/$f" fmnist/; done

# nvJPEG (about 6 MB): optional, so a machine without pip or network goes on without it.
carry_nvjpeg=""
if [[ ! -s nvjpeg/libnvjpeg.so.13 ]]; then
    nvtmp=$(mktemp -d)
    if ${PIP:-python3 -m pip} download --quiet --no-deps --only-binary=:all: -d "$nvtmp" nvidia-nvjpeg >/dev/null 2>&1 &&
        python3 -m zipfile -e "$nvtmp"/*.whl "$nvtmp/x" && lib=$(find "$nvtmp/x" -name libnvjpeg.so.13 | head -n 1) &&
        [[ -n $lib ]]; then
        mkdir -p nvjpeg
        cp "$lib" nvjpeg/libnvjpeg.so.13
    else
        echo "prepare_device_check: nvidia-nvjpeg could not be downloaded: test_gpu_nvjpeg will use the GPU" \
            "machine's own nvJPEG, or skip" >&2
    fi
    rm -rf "$nvtmp"
fi
[[ -s nvjpeg/libnvjpeg.so.13 ]] && carry_nvjpeg=', "nvjpeg"'

# Every optional library off, whatever this machine has: what the GPU machine lacks must not be
# linked. (tools/device_check.sh's fallback build, made there, uses the same options.)
cmake -S . -B $BUILD -G Ninja -DCUTRAIN_CUDA=ON -DCUTRAIN_NCCL=ON -DCUTRAIN_OPENBLAS=OFF -DCUTRAIN_ONEDNN=OFF -DCUTRAIN_MPI=OFF \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DCT_FMNIST_DIR="$ROOT/fmnist"
cmake --build $BUILD --target device_check_binaries

# ---- what the binaries may load on the GPU machine ----------------------------------------------
# The C and C++ runtimes, OpenMP, zlib, and the CUDA libraries the GPU machine carries (cudart is
# linked statically, but a dynamic one is there too).
ALLOWED='^(linux-vdso\.so\.1|/lib64/ld-linux-x86-64\.so\.2|ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|libstdc\+\+\.so\.6|libgcc_s\.so\.1|libgomp\.so\.1|libz\.so\.1|libcudart\.so\.[0-9]+|libcublas\.so\.[0-9]+|libcublasLt\.so\.[0-9]+|libcudnn(_[a-z_]+)?\.so\.[0-9]+|libnccl\.so\.[0-9]+)$'
bins=("$BUILD/cutrain")
while IFS= read -r name; do bins+=("$BUILD/tests/$name"); done < <(
    ctest --test-dir $BUILD -N -L gpu | sed -n 's/^ *Test *#[0-9]*: *//p')
if ((${#bins[@]} < 2)); then
    echo "prepare_device_check: ctest lists no gpu test in $BUILD" >&2
    exit 1
fi
bad=0
for b in "${bins[@]}"; do
    if [[ ! -x $b ]]; then
        echo "prepare_device_check: $b was not built" >&2
        bad=1
        continue
    fi
    # ldd: "libfoo.so.1 => /path (0x...)", "libfoo.so.1 => not found" or "/lib64/ld-linux... (0x...)"
    while read -r lib rest; do
        [[ -z $lib ]] && continue
        if [[ $rest == *"not found"* ]]; then
            echo "prepare_device_check: $b needs $lib, which is not found here either" >&2
            bad=1
        elif [[ ! $lib =~ $ALLOWED ]]; then
            echo "prepare_device_check: $b needs $lib, which the GPU machine does not have" \
                "(allowed: libc, libm, libdl, libpthread, librt, libstdc++, libgcc_s, libgomp, libz," \
                "cudart, cuBLAS, cuBLASLt, cuDNN, NCCL); turn the option that links it off above" >&2
            bad=1
        fi
    done < <(ldd "$b" 2>&1 | sed 's/^[[:space:]]*//')
done
if ((bad)); then
    exit 1
fi
echo "ldd: cutrain and $((${#bins[@]} - 1)) gpu tests need only the allowed libraries"

tar -C "$ROOT" --exclude='*.o' --exclude='*.a' --exclude="$BUILD/CMakeFiles/3.*" --exclude="$BUILD/Testing" \
    -cf - $BUILD | xz -T1 --lzma2=preset=6,dict=128MiB >$BUILD.tar.xz.part
mv $BUILD.tar.xz.part $BUILD.tar.xz

# The working tree travels too (tracked and untracked files), within the 64 MiB of a device call.
tree_mib=$(git ls-files -z --cached --others --exclude-standard | du -cm --files0-from=- 2>/dev/null | tail -n 1 | cut -f 1)
carried=($BUILD.tar.xz fmnist)
[[ -n $carry_nvjpeg ]] && carried+=(nvjpeg)
carried_mib=$(du -cm "${carried[@]}" | tail -n 1 | cut -f 1)
du -sh "${carried[@]}"
echo "carried: about ${carried_mib} MiB, with the working tree's ${tree_mib} MiB, of the 64 MiB allowed"
if ((carried_mib + tree_mib > 62)); then
    echo "prepare_device_check: ${carried_mib} + ${tree_mib} MiB will not travel in 64 MiB" >&2
    exit 1
fi
echo "run: command=\"bash tools/device_check.sh fmnist\", carry=[\"build-gpu.tar.xz\", \"fmnist\"$carry_nvjpeg], timeout_s=480"
