#!/usr/bin/env bash
# The GPU check, run on a machine with an NVIDIA GPU from the repository root:
#   bash tools/gpu_check.sh            (results and logs under $OUT, default ./out)
# Builds (or reuses a carried build/), prints nvidia-smi and `trainer devices`, runs the whole test
# suite with the GPU cases enabled, trains the reference configs on GPU and CPU, benchmarks them
# against PyTorch on the same machine, and prints a short table last. Each step has a time limit;
# a failing step is recorded and the script goes on.
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
step() {  # step NAME SECONDS COMMAND...: runs it with a limit, logs to $OUT/NAME.log
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  printf '%-28s rc=%-3s %4ss\n' "$name" "$rc" "$((SECONDS - start))" | tee -a "$SUMMARY"
  return $rc
}

# Libraries: the system's cuDNN/cuBLAS, or those of PyTorch's pip packages.
for mod in nvidia.cudnn nvidia.cublas; do
  dir=$(python3 -c "import $mod, os; print(os.path.dirname($mod.__file__))" 2>/dev/null) || continue
  export LD_LIBRARY_PATH="$dir/lib:${LD_LIBRARY_PATH:-}"
  [ "$mod" = nvidia.cudnn ] && CUDNN_ROOT=$dir
done
[ -d gpu-carry/lib ] && export LD_LIBRARY_PATH="$PWD/gpu-carry/lib:$LD_LIBRARY_PATH"
# Way 2 of GPU.md: the dependencies' .deb files travel, unpacked here into a local prefix.
if [ -f gpu-carry/unpack.sh ] && [ ! -d gpu-carry/prefix ]; then
  step unpack 120 bash gpu-carry/unpack.sh
fi
# shellcheck disable=SC1091
[ -f gpu-carry/env.sh ] && . gpu-carry/env.sh

step nvidia-smi 30 nvidia-smi
BUILD=build
if [ ! -x build/trainer ] && [ -d gpu-carry/prefix ]; then
  BUILD=build-gpu
  step configure 300 cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$PWD/gpu-carry/prefix/usr" -DCMAKE_CUDA_ARCHITECTURES=90 \
    ${CUDNN_ROOT:+-DCUDNN_ROOT=$CUDNN_ROOT}
  step build 400 cmake --build build-gpu -j 16
fi
T="$BUILD/trainer"
step devices 60 "$T" devices
cat "$OUT/devices.log"
step tests 300 ctest --test-dir "$BUILD" --output-on-failure -j 8

declare -A BATCH=([lenet]=64 [mlp]=128 [cifar_cnn]=128)
for c in lenet mlp cifar_cnn; do
  b=${BATCH[$c]}
  step "train-$c-gpu" 120 "$T" --config "configs/$c.yaml" --device gpu --epochs 1 --metrics "$OUT/$c-gpu.jsonl"
  step "train-$c-cpu16" 300 "$T" --config "configs/$c.yaml" --device cpu --threads 16 --epochs 1 --metrics "$OUT/$c-cpu.jsonl"
  step "bench-$c-gpu" 120 "$T" bench --config "configs/$c.yaml" --device gpu --batch-size "$b" --steps 50 --json
  step "bench-$c-cpu16" 200 "$T" bench --config "configs/$c.yaml" --device cpu --threads 16 --batch-size "$b" --steps 20 --json
  step "torch-$c-cuda" 200 python3 bench/pytorch_bench.py --config "configs/$c.yaml" --device cuda --batch-size "$b" --steps 50 --json
done

# The user's view: one side-by-side table, and a batch-size sweep with per-layer times and placement.
step side-by-side-lenet 240 "$T" --config configs/lenet.yaml --device gpu,cpu:16 --epochs 2 \
  --metrics "$OUT/side-by-side.jsonl"
step bench-sweep-cifar 240 "$T" bench --config configs/cifar_cnn.yaml --device gpu,cpu:16 \
  --batch-sizes 16,64,256 --steps 20 --per-layer --log-placement

echo
echo "== summary =="
cat "$SUMMARY"
echo
printf '%-10s %14s %14s %14s\n' config tandem-gpu pytorch-gpu tandem-cpu16
for c in lenet mlp cifar_cnn; do
  get() { python3 -c "import json,sys; print(round(json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])['train_images_per_second']))" "$1" 2>/dev/null || echo -; }
  printf '%-10s %14s %14s %14s\n' "$c" "$(get "$OUT/bench-$c-gpu.log")" "$(get "$OUT/torch-$c-cuda.log")" "$(get "$OUT/bench-$c-cpu16.log")"
done
