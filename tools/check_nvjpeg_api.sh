#!/usr/bin/env bash
# Checks cutrain's own nvJPEG declarations (engine/base/nvjpeg_api.h, what the CUDA backend loads
# with dlopen) against the real nvjpeg.h: downloads PyPI's nvidia-nvjpeg wheel (and, where no CUDA
# toolkit provides cuda_runtime_api.h, nvidia-cuda-runtime's headers), then compiles
# tests/nvjpeg/check_nvjpeg_api.c, whose static assertions name any prototype, value or layout that
# differs. Exits non-zero on a mismatch or when the headers cannot be had. CI runs it.
#
# Usage: tools/check_nvjpeg_api.sh [NVJPEG_INCLUDE_DIR]
#   NVJPEG_INCLUDE_DIR: a folder holding nvjpeg.h (skips the download)
#   PIP: the pip to download with (default: python3 -m pip); CC: the C compiler (default: cc)
#   LIB_OUT: a folder to copy the wheel's libnvjpeg.so.13 into (for test_image_encoded's load of
#            the real library, CT_NVJPEG_TEST_LIBRARY); only when the wheel was downloaded
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
pip_cmd=(${PIP:-python3 -m pip})

fetch() {   # fetch PACKAGE: unpacks its wheel under $work/PACKAGE
    "${pip_cmd[@]}" download --quiet --no-deps --only-binary=:all: -d "$work/wheels-$1" "$1"
    mkdir -p "$work/$1"
    python3 -m zipfile -e "$work/wheels-$1"/*.whl "$work/$1"
}

inc="${1:-}"
if [ -z "$inc" ]; then
    fetch nvidia-nvjpeg
    inc="$(dirname "$(find "$work/nvidia-nvjpeg" -name nvjpeg.h | head -n 1)")"
fi
[ -f "$inc/nvjpeg.h" ] || { echo "check_nvjpeg_api: no nvjpeg.h in '$inc'" >&2; exit 1; }

# nvjpeg.h includes cuda_runtime_api.h and library_types.h
cuda_inc=""
for d in "${CUDA_HOME:-/usr/local/cuda}/include" /usr/local/cuda/include /usr/include; do
    if [ -f "$d/cuda_runtime_api.h" ]; then cuda_inc="$d"; break; fi
done
if [ -z "$cuda_inc" ]; then
    fetch nvidia-cuda-runtime
    cuda_inc="$(dirname "$(find "$work/nvidia-cuda-runtime" -name cuda_runtime_api.h | head -n 1)")"
fi

version="$(sed -n 's/^#define NVJPEG_VER_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' "$inc/nvjpeg.h" | paste -sd.)"
"${CC:-cc}" -std=c11 -Wall -Wextra -Werror -fsyntax-only -I"$inc" -I"$cuda_inc" -I"$root/engine" \
    "$root/tests/nvjpeg/check_nvjpeg_api.c"
if [ -n "${LIB_OUT:-}" ] && [ -d "$work/nvidia-nvjpeg" ]; then
    mkdir -p "$LIB_OUT"
    cp "$(find "$work/nvidia-nvjpeg" -name libnvjpeg.so.13 | head -n 1)" "$LIB_OUT/"
fi
echo "check_nvjpeg_api: engine/base/nvjpeg_api.h matches nvjpeg.h $version ($inc)"
