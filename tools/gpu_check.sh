#!/usr/bin/env bash
# The GPU check, run on a machine with an NVIDIA GPU from the repository root:
#   bash tools/gpu_check.sh           the first run, about 5 minutes (BUDGET=300 s)
#   bash tools/gpu_check.sh --rest    the second run: the rest, about 5 minutes (BUDGET=300 s)
#   bash tools/gpu_check.sh --all     both in one go (BUDGET=540 s)
# Finds a build: gpu-carry/way1.tar.xz (tools/gpu_carry.sh: built here, the libraries beside it),
# else gpu-carry/debs (tools/gpu_pack.sh: the dependencies' .deb files, built there).
# The first run: nvidia-smi, `trainer devices`, the op tests with their GPU cases (the 16-bit ones
# too), the engine's GPU cases (CPU/GPU training parity in fp32, bf16 and fp16, upload ahead, the
# update gate), tandem against PyTorch with cuDNN on LeNet and cifar_cnn, one side-by-side LeNet
# epoch, and three LeNet epochs in fp32, bf16 and fp16 side by side on the GPU. The rest: the
# whole suite, the other configs against PyTorch, cuDNN's heuristic against its timed search, 16-thread CPU
# benchmarks and the batch-size sweep.
# What comes back from the device is at most 8 files of $OUT and the last 12,000 characters of
# the output, so $OUT holds two files: summary.txt and logs.tar.gz (every step's log, rebuilt
# after each step, so a run cut short still returns what it did). The output ends with, for every
# failed step, its failed tests and the last lines of its log, then the summary table.
# Each step's limit is cut to what is left of BUDGET; a step that no longer fits is skipped and
# says so. Plot rendering (PLplot's drivers, not carried) is left out of the test runs.
set -u
PART=first
case "${1:-}" in
  "") ;;
  --rest) PART=rest ;;
  --all) PART=all ;;
  *)
    echo "usage: bash tools/gpu_check.sh [--rest | --all]" >&2
    exit 2
    ;;
esac
declare -A DEFAULT_BUDGET=([first]=300 [rest]=300 [all]=540)
BUDGET=${BUDGET:-${DEFAULT_BUDGET[$PART]}}
OUT=${OUT:-$PWD/out}
LOGS=$PWD/gpu-run/logs  # the step logs, packed into $OUT/logs.tar.gz
rm -rf "$LOGS"
mkdir -p "$OUT" "$LOGS"
SUMMARY=$LOGS/summary.txt
: > "$SUMMARY"
END=$((SECONDS + BUDGET))
FAILED=()
first() { [ "$PART" != rest ]; }
rest() { [ "$PART" != first ]; }

pack() {  # $OUT/summary.txt and $OUT/logs.tar.gz, as they stand
  cp "$SUMMARY" "$OUT/summary.txt"
  tar -C "$LOGS" -czf "$OUT/.logs.tar.gz" . && mv -f "$OUT/.logs.tar.gz" "$OUT/logs.tar.gz"
}
note() { echo "$*" | tee -a "$SUMMARY"; }
step() {  # step NAME SECONDS COMMAND...: runs it with a limit, logs to $LOGS/NAME.log
  local name=$1 limit=$2
  shift 2
  local left=$((END - SECONDS - 5))  # 5 s stay for the report
  if [ "$left" -lt 10 ]; then
    note "$(printf '%-28s skipped (budget of %ss spent)' "$name" "$BUDGET")"
    return 124
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local start=$SECONDS
  timeout -k 5 "$limit" "$@" > "$LOGS/$name.log" 2>&1
  local rc=$?
  note "$(printf '%-28s rc=%-3s %4ss (limit %ss)' "$name" "$rc" "$((SECONDS - start))" "$limit")"
  [ "$rc" -ne 0 ] && FAILED+=("$name")
  pack
  return $rc
}
report() {  # the failed steps' tests and last lines, then the summary table, last in the output
  {
    for name in "${FAILED[@]}"; do
      echo
      local n
      n=$(grep -c '^\[  FAILED  \]' "$LOGS/$name.log" 2>/dev/null)
      echo "== $name failed: ${n:-0} [  FAILED  ] lines =="
      grep '^\[  FAILED  \]' "$LOGS/$name.log" 2>/dev/null | sort -u | head -40
      echo "-- last lines of $name.log --"
      tail -n 12 "$LOGS/$name.log" 2>/dev/null | cut -c1-240
    done
    echo
    echo "== summary ($PART run, budget ${BUDGET}s, $SECONDS s used) =="
    cat "$SUMMARY"
  } > "$LOGS/report.txt"
  cp "$LOGS/report.txt" "$SUMMARY.tmp" && mv "$SUMMARY.tmp" "$SUMMARY"
  pack
  cat "$SUMMARY"
}

# The CUDA libraries (the toolkit's, and cuDNN, cuBLAS and NCCL of PyTorch's pip packages) for
# every command; the carried libraries below only for tandem's own.
# shellcheck disable=SC1091
. tools/gpu_env.sh > "$LOGS/gpu_env.log" 2>&1
CARRIED=
TANDEM=(env)  # the prefix of tandem's commands: env LD_LIBRARY_PATH=<carried>:...
carry() {
  CARRIED=$1
  TANDEM=(env)
  [ -n "$CARRIED" ] && TANDEM+=("LD_LIBRARY_PATH=$CARRIED${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
}

BUILD=
setup_start=$SECONDS
# Way 1: the build made here. Its binaries and CTest files name the folder it was built in
# (TANDEM_SOURCE_DIR, TANDEM_TRAINER): a link from there to here makes them right.
if [ -f gpu-carry/way1.tar.xz ]; then
  rm -rf gpu-carry/way1 && mkdir -p gpu-carry/way1 &&
    tar -C gpu-carry/way1 -xJf gpu-carry/way1.tar.xz
  from=$(ls gpu-carry/way1/*/carried-from 2>/dev/null | head -1)
  if [ -n "$from" ]; then
    b=$(basename "$(dirname "$from")")
    src=$(sed -n 's/^source_dir=//p' "$from")
    # A build folder of that name already here (a build made on this machine) is moved aside,
    # never deleted.
    if [ -d "$b" ] && [ ! -L "$b" ]; then
      rm -rf "$b.before-way1" && mv "$b" "$b.before-way1" && note "way 1: moved $b to $b.before-way1"
    fi
    rm -f "$b" && ln -s "$PWD/gpu-carry/way1/$b" "$b"
    if [ "$src" != "$PWD" ] && [ ! -e "$src" ]; then
      mkdir -p "$(dirname "$src")" && ln -s "$PWD" "$src" ||
        note "way 1: cannot link $src here: tests that read files by path will fail"
    fi
    carry "$PWD/gpu-carry/way1/lib"
    missing=$("${TANDEM[@]}" ldd "$b/trainer" "$b/libtandem_gpu.so" "$b/tests/cuda_tests" 2>&1 |
      grep "not found" | sort -u | tr -s ' \t\n' ' ')
    if [ -n "$missing" ]; then
      note "way 1: $missing"
      carry ""
    else
      BUILD=$b
    fi
  fi
fi
# Way 2: the dependencies' .deb files, unpacked into a local prefix and built here.
if [ -z "$BUILD" ] && [ -f gpu-carry/unpack.sh ]; then
  [ -d gpu-carry/prefix ] || step unpack 60 bash gpu-carry/unpack.sh
  saved_path=${LD_LIBRARY_PATH:-}
  # shellcheck disable=SC1091
  . gpu-carry/env.sh
  export LD_LIBRARY_PATH=$saved_path
  carry "$TANDEM_CARRY_PREFIX/lib/x86_64-linux-gnu"
  step configure 60 "${TANDEM[@]}" cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$TANDEM_CARRY_PREFIX" -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DTANDEM_CUDA=ON ${CUDNN_ROOT:+-DCUDNN_ROOT=$CUDNN_ROOT} &&
    step build 300 "${TANDEM[@]}" cmake --build build-gpu -j 16 && BUILD=build-gpu
fi
{
  echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
  echo "carried (tandem's commands only)=$CARRIED"
  echo "CUDNN_ROOT=${CUDNN_ROOT:-} BUILD=$BUILD"
  [ -n "$BUILD" ] && "${TANDEM[@]}" ldd "$BUILD/trainer" "$BUILD/libtandem_gpu.so"
} > "$LOGS/environment.log" 2>&1
note "set-up: $((SECONDS - setup_start))s, build ${BUILD:-none}"

step nvidia-smi 15 nvidia-smi
smi=$?
if [ -z "$BUILD" ]; then
  note "no build: carry gpu-carry/way1.tar.xz (tools/gpu_carry.sh) or gpu-carry/debs" \
    "(tools/gpu_pack.sh)"
  report
  exit 1
fi
T="$BUILD/trainer"
step devices 60 "${TANDEM[@]}" "$T" devices
cat "$LOGS/devices.log"
# REHEARSE=1 goes on without a GPU, to try the steps on a machine that has none (its GPU cases
# skip, with the reason).
no_gpu() { [ "$smi" -ne 0 ] || grep -q "none usable" "$LOGS/devices.log"; }
if [ "${REHEARSE:-0}" != 1 ] && no_gpu; then
  why=$(grep -m1 'none usable' "$LOGS/devices.log" || echo 'see devices.log')
  note "no GPU: nvidia-smi rc=$smi; trainer devices: $(echo "$why" | sed "s/^ *//")"
  report
  exit 1
fi

NOPLOT='-*Plot*'
if first; then
  # The op tests (CPU and GPU cases against the reference, CPU/GPU parity of each op), the
  # 16-bit ones included (Backends/Ops16Test.*/gpu_bf16 and gpu_fp16).
  step backend-tests 120 "${TANDEM[@]}" bash -c "cd $BUILD/tests && ./backend_tests \
    --gtest_output=xml:$LOGS/backend_tests.xml"
  # The cases that call cuda/ directly: error translation, version gates, NCCL.
  step cuda-tests 30 "${TANDEM[@]}" bash -c "cd $BUILD/tests && ./cuda_tests \
    --gtest_output=xml:$LOGS/cuda_tests.xml"
  # The engine's GPU cases: training parity (fp32, and bf16 and fp16 against the CPU's fp32) and
  # determinism, 16-bit models against fp32, upload ahead, the update gate, transfers per step,
  # checkpoints across devices, the plugin.
  step gpu-engine-tests 120 "${TANDEM[@]}" bash -c "cd $BUILD/tests && ./tandem_tests \
    --gtest_filter='*gpu*:*Gpu*:*GPU*:*UploadAhead*:*GatedStep*:*Transfers*$NOPLOT' \
    --gtest_output=xml:$LOGS/gpu_engine_tests.xml"
fi

declare -A BATCH=([lenet]=64 [cifar_cnn]=128 [cifar_bn]=128 [cifar_resnet]=128 [mlp]=128)
versus_torch() {  # tandem's GPU bench and PyTorch's (cuDNN) of one config, the same batch
  local c=$1 b=${BATCH[$1]}
  step "bench-$c-gpu" 40 "${TANDEM[@]}" "$T" bench --config "configs/$c.yaml" --device gpu \
    --batch-size "$b" --steps 50 --json
  step "torch-$c-cuda" 60 python3 bench/pytorch_bench.py --config "configs/$c.yaml" \
    --device cuda --batch-size "$b" --steps 50 --json
}
if first; then
  versus_torch lenet
  versus_torch cifar_cnn
  step side-by-side-lenet 60 "${TANDEM[@]}" "$T" --config configs/lenet.yaml --device gpu,cpu:16 \
    --epochs 1 --metrics "$LOGS/side-by-side.jsonl"
  # The GPU's precisions side by side: three LeNet epochs each (after one, 16-bit rounding can
  # move the test accuracy on 2,000 images by more than the verdict's point while the loss curves
  # agree; by three it has settled), the 16-bit parity verdicts (the loss curves step by step,
  # fp16's overflowed steps left out and counted), and the cuDNN and cuBLAS kernels taken.
  step precisions-lenet-gpu 60 "${TANDEM[@]}" "$T" --config configs/lenet.yaml --device gpu \
    --precision fp32,bf16,fp16 --epochs 3 --log-placement --metrics "$LOGS/precisions.jsonl"
fi
if rest; then
  # Everything of the suite (the first run's cases again, briefly).
  step ctest 150 "${TANDEM[@]}" ctest --test-dir "$BUILD" --output-on-failure -j 16 -E Plot
  for c in cifar_bn cifar_resnet mlp; do versus_torch "$c"; done
  # cuDNN's heuristic choice instead of the timed search (gpu.conv_algo).
  for c in lenet cifar_cnn; do
    { cat "configs/$c.yaml"; echo "gpu: {conv_algo: heuristic}"; } > "$LOGS/$c-heuristic.yaml"
    step "bench-$c-gpu-heuristic" 40 "${TANDEM[@]}" "$T" bench --config "$LOGS/$c-heuristic.yaml" \
      --device gpu --batch-size "${BATCH[$c]}" --steps 50 --json
  done
  for c in lenet cifar_cnn cifar_bn cifar_resnet mlp; do
    step "bench-$c-cpu16" 40 "${TANDEM[@]}" "$T" bench --config "configs/$c.yaml" --device cpu \
      --threads 16 --batch-size "${BATCH[$c]}" --steps 20 --json
  done
  step bench-sweep-cifar 90 "${TANDEM[@]}" "$T" bench --config configs/cifar_cnn.yaml \
    --device gpu,cpu:16 --batch-sizes 16,64,256 --steps 20 --per-layer --log-placement
fi

# The throughput table (train images/s), into the summary.
get() {
  python3 -c "import json, sys
last = open(sys.argv[1]).read().strip().splitlines()[-1]
print(round(json.loads(last)['train_images_per_second']))" "$1" 2>/dev/null || echo -
}
{
  echo
  printf '%-12s %12s %12s %12s %12s\n' config tandem-gpu pytorch-gpu tandem-cpu16 heuristic
  for c in lenet cifar_cnn cifar_bn cifar_resnet mlp; do
    printf '%-12s %12s %12s %12s %12s\n' "$c" "$(get "$LOGS/bench-$c-gpu.log")" \
      "$(get "$LOGS/torch-$c-cuda.log")" "$(get "$LOGS/bench-$c-cpu16.log")" \
      "$(get "$LOGS/bench-$c-gpu-heuristic.log")"
  done
} >> "$SUMMARY"
report
[ "${#FAILED[@]}" -eq 0 ]
