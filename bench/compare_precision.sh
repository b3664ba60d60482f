#!/usr/bin/env bash
# tandem bf16 against PyTorch's autocast bf16 and against tandem's own fp32, CPU, same machine,
# same thread count, alternating.
#
#   bench/compare_precision.sh           # from anywhere; run it under the machine's CPU lock
#
# For lenet (batch 64), cifar_cnn (batch 128) and the torchvision networks resnet18_cifar,
# mobilenet_v2_cifar and efficientnet_b0_cifar (batch 64), ROUNDS times (default 3), it runs
#   build/trainer bench --config C --device cpu --threads T --precision fp32,bf16 --json
#   python3 bench/pytorch_bench.py ... --precision fp32
#   python3 bench/pytorch_bench.py ... --precision bf16
#   python3 bench/pytorch_bench.py ... --precision bf16 --channels-last
# then prints each run's training images/s, the best of each column, and the ratios of the bests:
# tandem bf16 / PyTorch's best bf16 (with or without channels_last), tandem bf16 / tandem fp32.
#
# Environment: TRAINER (default build/trainer), PYTHON (default /usr/bin/python3), THREADS
# (default 2), ROUNDS, WARMUP (default 5), STEPS_LENET / STEPS_CIFAR / STEPS_MODERN (defaults
# 60 / 20 / 8), ONLY (config names: those alone),
# PT_CORETYPE (as in compare_cpu.sh; bench/pytorch_env.sh picks OpenBLAS' kernel for this CPU).
set -u
cd "$(dirname "$0")/.."

TRAINER=${TRAINER:-build/trainer}
PYTHON=${PYTHON:-/usr/bin/python3}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
WARMUP=${WARMUP:-5}
RUNS=("lenet 64 ${STEPS_LENET:-60}" "cifar_cnn 128 ${STEPS_CIFAR:-20}"
      "resnet18_cifar 64 ${STEPS_MODERN:-8}" "mobilenet_v2_cifar 64 ${STEPS_MODERN:-8}"
      "efficientnet_b0_cifar 64 ${STEPS_MODERN:-8}")
source bench/pytorch_env.sh  # PT_ENV: OpenBLAS' kernel for this CPU; PT_ENV_NOTE says which
keep_only_runs               # ONLY="resnet18_cifar mobilenet_v2_cifar": those configs alone
COLUMNS_=(tandem_fp32 tandem_bf16 torch_fp32 torch_bf16 torch_bf16_cl)

# images FILE PRECISION: train images/s of the JSON line of that precision in FILE, or "-".
images() {
  "$PYTHON" - "$1" "$2" <<'PY'
import json, sys
try:
    for line in open(sys.argv[1]):
        if line.strip().startswith("{"):
            o = json.loads(line)
            if o.get("precision", "fp32") == sys.argv[2]:
                print(f"{o['train_images_per_second']:.0f}")
                break
    else:
        print("-")
except Exception:
    print("-")
PY
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
declare -A got
echo "$PT_ENV_NOTE"
echo "threads $THREADS, warm-up $WARMUP steps, $ROUNDS rounds; load average now:" \
     "$(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= ROUNDS; r++)); do
  for run in "${RUNS[@]}"; do
    read -r name batch steps <<<"$run"
    cfg=configs/$name.yaml
    common=(--config "$cfg" --device cpu --threads "$THREADS" --batch-size "$batch" --steps "$steps")
    "$TRAINER" bench "${common[@]}" --warmup "$WARMUP" --precision fp32,bf16 --json \
      >"$tmp/t" 2>"$tmp/err" || echo "tandem $name round $r failed: $(tail -n 3 "$tmp/err")" >&2
    got[$name,tandem_fp32,$r]=$(images "$tmp/t" fp32)
    got[$name,tandem_bf16,$r]=$(images "$tmp/t" bf16)
    for col in torch_fp32 torch_bf16 torch_bf16_cl; do
      extra=(--precision fp32)
      [[ $col != torch_fp32 ]] && extra=(--precision bf16)
      [[ $col == torch_bf16_cl ]] && extra+=(--channels-last)
      env "${PT_ENV[@]}" "$PYTHON" bench/pytorch_bench.py "${common[@]}" --warmup "$WARMUP" \
        "${extra[@]}" --json >"$tmp/p" 2>"$tmp/err" ||
        echo "pytorch $name $col round $r failed: $(tail -n 3 "$tmp/err")" >&2
      got[$name,$col,$r]=$(images "$tmp/p" "$([[ $col == torch_fp32 ]] && echo fp32 || echo bf16)")
    done
  done
done

best() { printf '%s\n' "$@" | grep -v '^-$' | sort -n | tail -n 1; }
ratio() { [[ -n $1 && -n $2 ]] && awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", a/b}' || echo -; }

echo
echo "train images/s (median step of each run: round 1, 2, ...; then the best)"
for run in "${RUNS[@]}"; do
  read -r name batch steps <<<"$run"
  echo "$name, batch $batch:"
  declare -A top=()
  for col in "${COLUMNS_[@]}"; do
    vals=()
    for ((r = 1; r <= ROUNDS; r++)); do vals+=("${got[$name,$col,$r]:--}"); done
    top[$col]=$(best "${vals[@]}")
    printf '  %-14s %s  best %s\n' "$col" "${vals[*]}" "${top[$col]:--}"
  done
  torch_best=$(best "${top[torch_bf16]:--}" "${top[torch_bf16_cl]:--}")
  echo "  tandem bf16 / PyTorch's best bf16: $(ratio "${top[tandem_bf16]}" "$torch_best")" \
       "   tandem bf16 / tandem fp32: $(ratio "${top[tandem_bf16]}" "${top[tandem_fp32]}")"
done
