#!/usr/bin/env bash
# The installed library as an outside program sees it. Installs the build into a temporary
# prefix and moves the prefix elsewhere (cutrain.pc and the CMake package must not remember where
# they were installed), then builds consumer.c against it twice, with pkg-config on a plain
# compiler command line and with find_package(cutrain) (CMakeLists.txt here), and runs both.
# A library missing from either link list fails the link; a broken library fails the run.
#
# Usage: run_install_test.sh BUILD_DIR SOURCE_DIR C_COMPILER CUDA   (CUDA: ON or OFF, as built)
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: $0 BUILD_DIR SOURCE_DIR C_COMPILER ON|OFF" >&2; exit 2; }
build=$1 src=$2 cc=$3 cuda=$4
here=$src/tests/install
command -v pkg-config >/dev/null || { echo "install test: needs pkg-config (apt-get install pkgconf)" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/cutrain-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
say() { printf 'install test: %s\n' "$*"; }
quiet() { "$@" >"$tmp/log" 2>&1 || { cat "$tmp/log"; say "FAILED: $*"; exit 1; }; }

# What is installed must be what the sources say: a no-op after `cmake --build`, and it keeps a
# lone `ctest -R install` from installing a stale or missing library.
quiet cmake --build "$build" --target cutrain cutrain_cli
say "cmake --install $build (to a prefix that is then moved)"
quiet cmake --install "$build" --prefix "$tmp/staged"
mv "$tmp/staged" "$tmp/prefix"
prefix=$tmp/prefix
cd "$tmp"   # the consumer reads a missing file by a relative name; make sure it is missing

# ---- pkg-config ----
pc=$(find "$prefix" -path '*/pkgconfig/cutrain.pc' | head -n 1)
[ -n "$pc" ] || { say "no pkgconfig/cutrain.pc under the prefix"; exit 1; }
export PKG_CONFIG_PATH=${pc%/cutrain.pc}
includedir=$(pkg-config --variable=includedir cutrain)
[ -f "$includedir/cutrain.h" ] || { say "cutrain.pc's includedir $includedir has no cutrain.h (moved prefix)"; exit 1; }
flags=$(pkg-config --static --cflags --libs cutrain)
say "pkg-config --static --cflags --libs cutrain: $flags"
# what the build enabled, no more: a CPU build must not ask for CUDA libraries
case $cuda in
    ON)  grep -q -- -lcudart_static <<<"$flags" || { say "a CUDA build's cutrain.pc lacks cudart_static"; exit 1; } ;;
    *)   if grep -qiE 'cuda|cudnn|nccl|cublas' <<<"$flags"; then say "a CPU build's cutrain.pc names CUDA libraries"; exit 1; fi ;;
esac
# shellcheck disable=SC2086  # the flags are words
quiet "$cc" -std=c11 -o consumer_pc "$here/consumer.c" $flags
say "run the pkg-config build"
./consumer_pc

# ---- find_package(cutrain) ----
quiet cmake -S "$here" -B "$tmp/cmake" -DCMAKE_C_COMPILER="$cc" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_BUILD_TYPE=Release
quiet cmake --build "$tmp/cmake"
say "run the find_package build"
"$tmp/cmake/consumer"
say "passed"
