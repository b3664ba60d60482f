#!/usr/bin/env bash
# The GPU check, run on a machine with an NVIDIA GPU from the repository root:
#   bash tools/gpu_check.sh            (results and logs under $OUT, default ./out)
# Finds a build: gpu-carry/way1.tar.xz (tools/gpu_carry.sh: built here, the libraries beside it),
# else gpu-carry/debs (tools/gpu_pack.sh: the dependencies' .deb files, built there). Then, most
# valuable first: nvidia-smi and `trainer devices`; the op tests with their GPU cases; the CPU/GPU
# parity and other GPU cases of the engine tests; benchmarks against PyTorch on the same machine;
# training runs; the whole suite; a short table last. The device tool gives one command at most
# 600 s, so the whole check keeps to BUDGET seconds (default 480): each step's limit is cut to
# what is left, and a step that no longer fits is skipped and says so. Every step logs to
# $OUT/NAME.log as it runs, so a step cut short still leaves what it printed.
set -u
OUT=${OUT:-$PWD/out}
BUDGET=${BUDGET:-480}
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
END=$((SECONDS + BUDGET))
step() {  # step NAME SECONDS COMMAND...: runs it with a limit, logs to $OUT/NAME.log
  local name=$1 limit=$2
  shift 2
  local left=$((END - SECONDS - 5))  # 5 s stay for the summary
  if [ "$left" -lt 10 ]; then
    printf '%-28s skipped (budget of %ss spent)\n' "$name" "$BUDGET" | tee -a "$SUMMARY"
    return 124
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local start=$SECONDS
  timeout -k 5 "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  printf '%-28s rc=%-3s %4ss (limit %ss)\n' "$name" "$rc" "$((SECONDS - start))" "$limit" |
    tee -a "$SUMMARY"
  return $rc
}
lib_dir() { [ -d "$1" ] && export LD_LIBRARY_PATH="$1${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; }

# CUDA libraries: the toolkit's, then (first on the path) cuDNN, cuBLAS and NCCL of PyTorch's pip
# packages, wherever their layout puts them.
lib_dir /usr/local/cuda/lib64
CUDNN_ROOT=
nv=$(python3 -c "import nvidia; print(list(nvidia.__path__)[0])" 2>/dev/null)
if [ -n "$nv" ]; then
  for lib in libcublas.so.13 libcudnn.so.9 libnccl.so.2; do
    f=$(find "$nv" -name "$lib" -print -quit 2>/dev/null)
    [ -n "$f" ] && lib_dir "$(dirname "$f")"
  done
  h=$(find "$nv" -name cudnn.h -print -quit 2>/dev/null)
  [ -n "$h" ] && CUDNN_ROOT=$(dirname "$(dirname "$h")")
fi

BUILD=
# Way 1: the build made here. Its binaries and CTest files name the folder it was built in
# (TANDEM_SOURCE_DIR, TANDEM_TRAINER): a link from there to here makes them right.
if [ -f gpu-carry/way1.tar.xz ]; then
  rm -rf gpu-carry/way1 && mkdir -p gpu-carry/way1 &&
    tar -C gpu-carry/way1 -xJf gpu-carry/way1.tar.xz
  from=$(ls gpu-carry/way1/*/carried-from 2>/dev/null | head -1)
  if [ -n "$from" ]; then
    b=$(basename "$(dirname "$from")")
    src=$(sed -n 's/^source_dir=//p' "$from")
    rm -rf "$b" && ln -s "$PWD/gpu-carry/way1/$b" "$b"
    if [ "$src" != "$PWD" ] && [ ! -e "$src" ]; then
      mkdir -p "$(dirname "$src")" && ln -s "$PWD" "$src" ||
        echo "way 1: cannot link $src here: tests that read files by path will fail" | tee -a "$SUMMARY"
    fi
    lib_dir "$PWD/gpu-carry/way1/lib"
    if ldd "$b/trainer" "$b/libtandem_gpu.so" | grep -q "not found"; then
      echo "way 1: $(ldd "$b/trainer" "$b/libtandem_gpu.so" | grep "not found" | tr -s ' \t\n' ' ')" |
        tee -a "$SUMMARY"
    else
      BUILD=$b
    fi
  fi
fi
# Way 2: the dependencies' .deb files, unpacked into a local prefix and built here.
if [ -z "$BUILD" ] && [ -f gpu-carry/unpack.sh ]; then
  [ -d gpu-carry/prefix ] || step unpack 60 bash gpu-carry/unpack.sh
  # shellcheck disable=SC1091
  . gpu-carry/env.sh
  step configure 60 cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$PWD/gpu-carry/prefix/usr" -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DTANDEM_CUDA=ON ${CUDNN_ROOT:+-DCUDNN_ROOT=$CUDNN_ROOT} &&
    step build 300 cmake --build build-gpu -j 16 && BUILD=build-gpu
fi
{
  echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
  echo "CUDNN_ROOT=$CUDNN_ROOT BUILD=$BUILD"
  [ -n "$BUILD" ] && ldd "$BUILD/trainer" "$BUILD/libtandem_gpu.so"
} > "$OUT/environment.log" 2>&1

step nvidia-smi 15 nvidia-smi
if [ -z "$BUILD" ]; then
  echo "no build: carry gpu-carry/way1.tar.xz (tools/gpu_carry.sh) or gpu-carry/debs" \
       "(tools/gpu_pack.sh)" | tee -a "$SUMMARY"
  exit 1
fi
T="$BUILD/trainer"
step devices 60 "$T" devices
cat "$OUT/devices.log"
# The op tests (CPU and GPU cases against the reference, CPU/GPU parity of each op).
step backend-tests 120 bash -c "cd $BUILD/tests && ./backend_tests --gtest_output=xml:$OUT/backend_tests.xml"
# The engine's GPU cases: training parity and determinism, upload ahead, checkpoints across devices.
step gpu-engine-tests 150 bash -c "cd $BUILD/tests && ./tandem_tests \
  --gtest_filter='*gpu*:*Gpu*:*GPU*:*UploadAhead*' --gtest_output=xml:$OUT/gpu_engine_tests.xml"

declare -A BATCH=([lenet]=64 [cifar_cnn]=128 [cifar_bn]=128 [cifar_resnet]=128 [mlp]=128)
for c in lenet cifar_cnn cifar_bn cifar_resnet; do
  b=${BATCH[$c]}
  step "bench-$c-gpu" 60 "$T" bench --config "configs/$c.yaml" --device gpu --batch-size "$b" --steps 50 --json
  step "torch-$c-cuda" 60 python3 bench/pytorch_bench.py --config "configs/$c.yaml" --device cuda --batch-size "$b" --steps 50 --json
done
# The same benches with cuDNN's heuristic choice instead of the timed search (gpu.conv_algo).
for c in lenet cifar_cnn; do
  b=${BATCH[$c]}
  { cat "configs/$c.yaml"; echo "gpu: {conv_algo: heuristic}"; } > "$OUT/$c-heuristic.yaml"
  step "bench-$c-gpu-heuristic" 40 "$T" bench --config "$OUT/$c-heuristic.yaml" --device gpu --batch-size "$b" --steps 50 --json
done
step train-lenet-gpu 60 "$T" --config configs/lenet.yaml --device gpu --epochs 1 --metrics "$OUT/lenet-gpu.jsonl"
step side-by-side-lenet 90 "$T" --config configs/lenet.yaml --device gpu,cpu:16 --epochs 1 \
  --metrics "$OUT/side-by-side.jsonl"
# Everything else of the suite (the GPU cases above run again, briefly).
step ctest 120 ctest --test-dir "$BUILD" --output-on-failure -j 16
for c in lenet cifar_cnn cifar_bn cifar_resnet mlp; do
  b=${BATCH[$c]}
  step "bench-$c-cpu16" 40 "$T" bench --config "configs/$c.yaml" --device cpu --threads 16 --batch-size "$b" --steps 20 --json
done
step bench-mlp-gpu 30 "$T" bench --config configs/mlp.yaml --device gpu --batch-size 128 --steps 50 --json
step torch-mlp-cuda 40 python3 bench/pytorch_bench.py --config configs/mlp.yaml --device cuda --batch-size 128 --steps 50 --json
step bench-sweep-cifar 90 "$T" bench --config configs/cifar_cnn.yaml --device gpu,cpu:16 \
  --batch-sizes 16,64,256 --steps 20 --per-layer --log-placement

echo
echo "== summary =="
cat "$SUMMARY"
echo
printf '%-12s %14s %14s %14s\n' config tandem-gpu pytorch-gpu tandem-cpu16
get() { python3 -c "import json,sys; print(round(json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])['train_images_per_second']))" "$1" 2>/dev/null || echo -; }
for c in lenet cifar_cnn cifar_bn cifar_resnet mlp; do
  printf '%-12s %14s %14s %14s\n' "$c" "$(get "$OUT/bench-$c-gpu.log")" "$(get "$OUT/torch-$c-cuda.log")" "$(get "$OUT/bench-$c-cpu16.log")"
done
printf '%-10s %14s %14s\n' config timed-search heuristic
for c in lenet cifar_cnn; do
  printf '%-10s %14s %14s\n' "$c" "$(get "$OUT/bench-$c-gpu.log")" "$(get "$OUT/bench-$c-gpu-heuristic.log")"
done
