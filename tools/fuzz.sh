#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/, clang with ASan and UBSan, into build-fuzz/) and runs
# each for SECONDS (default 20) from its committed seed corpus. A crash, a sanitizer report, an
# input that runs longer than 10 s, more than 2560 MiB of memory or one allocation over 1024 MiB
# (the largest the readers make is an image of 2^27 RGBA pixels, 512 MiB) fails the run; the
# input that did it is left in build-fuzz/findings/TARGET/ (crash-*, timeout-*, oom-*,
# leak-*). The corpus found along the way grows in build-fuzz/corpus/TARGET/, so a second run
# starts where the first ended.
#   bash tools/fuzz.sh               every target, 20 s each (CI)
#   bash tools/fuzz.sh 600           every target, 10 minutes each (make fuzz)
#   bash tools/fuzz.sh 60 image_fuzz one target
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(image_fuzz idx_fuzz cifar_fuzz config_fuzz safetensors_fuzz
                                     onnx_fuzz)
BUILD=${FUZZ_BUILD:-build-fuzz}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
if [ ! -f "$BUILD/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DTANDEM_FUZZ=ON -DTANDEM_CUDA=OFF -DTANDEM_MPI=OFF >/dev/null
fi
cmake --build "$BUILD" -j "${JOBS:-$(nproc)}" --target "${targets[@]}"

# The readers' own memory is what is limited, not the instrumentation's: leaks are reported (and
# fail) at exit; the OpenMP runtime's per-thread state is kept on purpose.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# The targets write each input to a file (the readers take paths): under the build folder.
mkdir -p "$BUILD/tmp"
TMPDIR=$(cd "$BUILD/tmp" && pwd)
export TMPDIR
status=0
for t in "${targets[@]}"; do
  corpus=$BUILD/corpus/${t%_fuzz} findings=$BUILD/findings/$t
  mkdir -p "$corpus" "$findings"
  echo "== $t: ${seconds}s from tests/fuzz/corpus/${t%_fuzz}"
  if ! "$BUILD/tests/fuzz/$t" "$corpus" "tests/fuzz/corpus/${t%_fuzz}" \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2560 -malloc_limit_mb=1024 \
      -artifact_prefix="$findings/" -close_fd_mask=1 -print_final_stats=1 \
      >"$findings/log.txt" 2>&1; then
    status=1
    echo "$t FAILED: see $findings/ (the input and log.txt); the end of its log:"
    tail -40 "$findings/log.txt"
  else
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$findings/log.txt" | tr '\n' ' '
    echo
  fi
done
exit $status
