#!/usr/bin/env bash
# tandem vs PyTorch training/inference throughput on the CPU, same machine, same thread count.
#
#   bench/compare_cpu.sh                 # from anywhere; paths are relative to the repo root
#
# For lenet (batch 64), mlp (128), cifar_cnn, cifar_bn and cifar_resnet (128), with THREADS threads (default 2), it runs
#   build/trainer bench --config C --device cpu --threads T --batch-size B --steps S --json
#   python3 bench/pytorch_bench.py --config C --device cpu --threads T --batch-size B --steps S --json
# alternately, ROUNDS times (default 2; the spread between rounds shows the noise), and prints
# every run's images/s, the best of each, and the ratio tandem/pytorch of the bests.
#
# PyTorch runs in its fastest CPU setup for the CPU it runs on (bench/pytorch_env.sh picks
# OpenBLAS' kernel: SkylakeX with AVX-512, Zen on AMD without it, Haswell otherwise; the first
# line printed names the CPU and the kernel; see bench/README.md).
#
# Environment: TRAINER (default build/trainer), PYTHON (default /usr/bin/python3), THREADS,
# ROUNDS, WARMUP (default 10), STEPS_LENET / STEPS_MLP / STEPS_CIFAR / STEPS_MODERN (defaults
# 100 / 200 / 30 / 10; MODERN: resnet18_cifar, mobilenet_v2_cifar, efficientnet_b0_cifar),
# ONLY (config names),
# PT_CORETYPE (OpenBLAS' kernel instead of the one chosen, or auto: OpenBLAS' own detection),
# PT_ARGS (extra pytorch_bench.py flags, e.g. PT_ARGS=--channels-last; default none: NCHW).
set -u
cd "$(dirname "$0")/.."

TRAINER=${TRAINER:-build/trainer}
PYTHON=${PYTHON:-/usr/bin/python3}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-2}
WARMUP=${WARMUP:-10}
read -r -a PT_EXTRA <<<"${PT_ARGS:-}"
RUNS=(
  "lenet 64 ${STEPS_LENET:-100}"
  "mlp 128 ${STEPS_MLP:-200}"
  "cifar_cnn 128 ${STEPS_CIFAR:-30}"
  "cifar_bn 128 ${STEPS_CIFAR:-30}"
  "cifar_resnet 128 ${STEPS_CIFAR:-30}"
  "resnet18_cifar 64 ${STEPS_MODERN:-10}"
  "mobilenet_v2_cifar 64 ${STEPS_MODERN:-10}"
  "efficientnet_b0_cifar 64 ${STEPS_MODERN:-10}"
)
source bench/pytorch_env.sh  # PT_ENV: OpenBLAS' kernel for this CPU; PT_ENV_NOTE says which
keep_only_runs               # ONLY="resnet18_cifar mobilenet_v2_cifar": those configs alone

have_trainer=1
if [[ ! -x $TRAINER ]]; then
  have_trainer=0
  echo "note: $TRAINER is missing (not built yet?): tandem columns are left empty" >&2
fi

# field FILE KEY: a number from a one-line JSON object, or "-".
field() {
  "$PYTHON" - "$1" "$2" <<'EOF'
import json, sys
try:
    lines = [l for l in open(sys.argv[1]) if l.strip().startswith("{")]
    v = json.loads(lines[-1])[sys.argv[2]]
    print(f"{float(v):.0f}")
except Exception:
    print("-")
EOF
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "$PT_ENV_NOTE"
echo "threads $THREADS, warm-up $WARMUP steps, $ROUNDS rounds alternating tandem / pytorch;" \
     "load average now: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= ROUNDS; r++)); do
  for run in "${RUNS[@]}"; do
    read -r name batch steps <<<"$run"
    cfg=configs/$name.yaml
    if ((have_trainer)); then
      if ! "$TRAINER" bench --config "$cfg" --device cpu --threads "$THREADS" \
           --batch-size "$batch" --steps "$steps" --json >"$tmp/t.$name.$r" 2>"$tmp/t.$name.$r.err"; then
        echo "tandem $name round $r failed: $(tail -n 3 "$tmp/t.$name.$r.err")" >&2
      fi
    fi
    if ! env "${PT_ENV[@]}" "$PYTHON" bench/pytorch_bench.py --config "$cfg" --device cpu \
         --threads "$THREADS" --batch-size "$batch" --steps "$steps" --warmup "$WARMUP" \
         "${PT_EXTRA[@]}" --json >"$tmp/p.$name.$r" 2>"$tmp/p.$name.$r.err"; then
      echo "pytorch $name round $r failed: $(tail -n 3 "$tmp/p.$name.$r.err")" >&2
    fi
  done
done

best() { printf '%s\n' "$@" | grep -v '^-$' | sort -n | tail -n 1; }

for metric in train infer; do
  echo
  echo "$metric images/s (median step; each round's figure, then the best)"
  hdr=$(printf '%-13s %5s' config batch)
  for ((r = 1; r <= ROUNDS; r++)); do hdr+=$(printf ' %9s %9s' "tandem$r" "torch$r"); done
  hdr+=$(printf ' %9s %9s %8s' "tandem" "pytorch" "ratio")
  echo "$hdr"
  for run in "${RUNS[@]}"; do
    read -r name batch steps <<<"$run"
    line=$(printf '%-13s %5s' "$name" "$batch")
    tv=() pv=()
    for ((r = 1; r <= ROUNDS; r++)); do
      t=$( [[ -f $tmp/t.$name.$r ]] && field "$tmp/t.$name.$r" "${metric}_images_per_second" || echo -)
      p=$(field "$tmp/p.$name.$r" "${metric}_images_per_second")
      tv+=("$t") pv+=("$p")
      line+=$(printf ' %9s %9s' "$t" "$p")
    done
    tb=$(best "${tv[@]}"); pb=$(best "${pv[@]}")
    ratio=-
    if [[ -n $tb && -n $pb ]]; then ratio=$(awk -v a="$tb" -v b="$pb" 'BEGIN{printf "%.2f", a/b}'); fi
    line+=$(printf ' %9s %9s %8s' "${tb:--}" "${pb:--}" "$ratio")
    echo "$line"
  done
done
echo
echo "ratio = best tandem / best pytorch (above 1: tandem is faster)"
