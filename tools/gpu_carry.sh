#!/usr/bin/env bash
# Prepares gpu-carry/ for a lent GPU machine from a GPU build made here ("way 1" of GPU.md):
#   cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90
#   cmake --build build-cuda && bash tools/gpu_carry.sh [build-cuda]
# Packs the executables (trainer and its GPU plugin libtandem_gpu.so, the three test binaries,
# their CTest files) and every shared library they load that the GPU machine lacks (tandem's engine,
# yaml-cpp, spdlog, fmt, oneDNN, gomp, ...) into gpu-carry/way1.tar.xz; tools/gpu_check.sh unpacks
# it there and gives its lib/ to tandem's own commands only. Left out: glibc, libstdc++ and
# libgcc_s (the machine's own must serve: an older libstdc++ carried there would be loaded by
# whatever else runs with it on the library path, PyTorch included), and the CUDA libraries
# (cudart, cuBLAS, cuDNN), found there by tools/gpu_env.sh. Prints the size of what travels
# against the 64 MiB the device tool carries.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-cuda}
CARRY=gpu-carry
BINS=("$BUILD/trainer" "$BUILD/libtandem_gpu.so" "$BUILD/tests/backend_tests"
      "$BUILD/tests/tandem_tests" "$BUILD/tests/cuda_tests")
for b in "${BINS[@]}"; do
  [ -e "$b" ] || { echo "error: $b is missing; build $BUILD with CUDA first" >&2; exit 1; }
done
if ! ldd "$BUILD/libtandem_gpu.so" | grep -q libcudart; then
  echo "error: $BUILD/libtandem_gpu.so does not load libcudart; configure $BUILD with CUDA" >&2
  exit 1
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/$BUILD/tests" "$stage/lib"
cp "$BUILD/trainer" "$BUILD/libtandem_gpu.so" "$BUILD/libtandem_engine.so" "$stage/$BUILD/"
cp "$BUILD/tests/backend_tests" "$BUILD/tests/tandem_tests" "$BUILD/tests/cuda_tests" \
  "$stage/$BUILD/tests/"
# ctest reads these; they name the build's absolute paths, which gpu_check.sh links there.
cp "$BUILD/CTestTestfile.cmake" "$stage/$BUILD/"
cp "$BUILD"/tests/*.cmake "$stage/$BUILD/tests/"
# The libraries the binaries load, but not glibc and the compiler's runtime (the machine's own
# must serve) nor CUDA's.
ldd "${BINS[@]}" | awk '/=> \//{print $3}' | sort -u |
  grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libstdc\+\+|libgcc_s)\.so' |
  grep -Ev '/libcu(dart|blas|blasLt|dnn)\.so' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
echo "source_dir=$(pwd)" > "$stage/$BUILD/carried-from"

mkdir -p "$CARRY"
rm -f "$CARRY/way1.tar.xz"
tar -C "$stage" -cJf "$CARRY/way1.tar.xz" .
echo "packed: $(ls "$stage/lib" | tr '\n' ' ')"
tree_kib=$(git ls-files -co --exclude-standard -z | du -c -k --files0-from=- | tail -1 | cut -f1)
carry_kib=$(du -sk "$CARRY/way1.tar.xz" | cut -f1)
debs_kib=0
[ -d "$CARRY/debs" ] && debs_kib=$(du -sk "$CARRY/debs" "$CARRY/unpack.sh" "$CARRY/env.sh" |
  awk '{s += $1} END {print s}')
echo "gpu-carry/way1.tar.xz ${carry_kib} KiB; working tree ${tree_kib} KiB; gpu-carry/debs" \
     "(way 2, from tools/gpu_pack.sh) ${debs_kib} KiB"
echo "total that travels (working tree + gpu-carry/way1.tar.xz + way 2's files):" \
     "$(( (tree_kib + carry_kib + debs_kib) / 1024 )) MiB (limit 64 MiB)"
