# Points the dynamic loader at the CUDA libraries tandem's GPU backend loads (cudart, cuBLAS,
# cuDNN, NCCL), wherever this machine has them: the toolkit's lib64, and the nvidia-* pip packages
# that PyTorch brings (nvidia/cudnn/lib, nvidia/cublas/lib, ...), which are often the only cuDNN on
# a machine set up for PyTorch. Source it, from any folder, before running the trainer by hand:
#   . tools/gpu_env.sh            (or: source tools/gpu_env.sh; add -q for no report)
#   build/trainer --config configs/lenet.yaml --device gpu
# It prepends the folders it finds to LD_LIBRARY_PATH (each once, so sourcing it again changes
# nothing), sets CUDNN_ROOT (cuDNN's folder with include/, for `cmake -DCUDNN_ROOT=$CUDNN_ROOT`)
# when it finds cuDNN's headers, and says what it found. Nothing is installed or copied.
_tandem_gpu_env() {
  local quiet=$1 dir lib f g nv want found="" missing="" skipped=""
  _tandem_prepend() {
    case ":${LD_LIBRARY_PATH:-}:" in
      *":$1:"*) ;;
      *) export LD_LIBRARY_PATH="$1${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;;
    esac
  }
  for dir in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -d "$dir" ] && _tandem_prepend "$dir"
  done
  # The CUDA major version tandem is built for: the toolkit's (libcudart.so.13 below).
  want=$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
  want=${want:-13}
  # The CUDA major a cuDNN library was built for, asked of the library itself
  # (cudnnGetCudartVersion: 13010 for 13.1); empty when it cannot be loaded.
  _tandem_cudnn_cuda() {
    python3 - "$1" 2>/dev/null <<'PY'
import ctypes, sys
try:
    print(ctypes.CDLL(sys.argv[1]).cudnnGetCudartVersion() // 1000)
except Exception:
    pass
PY
  }
  # The pip packages' folders go first: a toolkit without cuDNN must not hide theirs. cuDNN's
  # name is libcudnn.so.9 for every CUDA major, so a cuDNN built for another CUDA (a cu12 PyTorch
  # beside a CUDA 13 build) is passed over: it would stop every GPU run at start-up.
  nv=$(python3 -c "import nvidia, sys; sys.stdout.write(list(nvidia.__path__)[0])" 2>/dev/null)
  for lib in libcudart.so.13 libcublas.so.13 libcudnn.so.9 libnccl.so.2; do
    f=""
    [ -n "$nv" ] && f=$(find "$nv" -name "$lib" -print 2>/dev/null | sort)
    if [ "$lib" = libcudnn.so.9 ] && [ -n "$f" ]; then
      local pick="" other="" major
      for g in $f; do
        major=$(_tandem_cudnn_cuda "$g")
        if [ "$major" = "$want" ] && [ -z "$pick" ]; then
          pick=$g
        else
          other="$other $g (CUDA ${major:-unknown})"
        fi
      done
      [ -n "$other" ] &&
        skipped="$skipped libcudnn.so.9 from pip not built for CUDA $want:$other;"
      f=$pick
    else
      f=$(printf '%s\n' "$f" | head -n 1)
    fi
    if [ -n "$f" ]; then
      _tandem_prepend "$(dirname "$f")"
      found="$found $lib (pip: $(dirname "$f"))"
    elif ldconfig -p 2>/dev/null | grep -q "$lib" ||
      [ -e "/usr/local/cuda/lib64/$lib" ]; then
      found="$found $lib (system)"
    else
      missing="$missing $lib"
    fi
  done
  if [ -n "$nv" ]; then
    f=$(find "$nv" -name cudnn.h -print -quit 2>/dev/null)
    [ -n "$f" ] && export CUDNN_ROOT="$(dirname "$(dirname "$f")")"
  fi
  unset -f _tandem_prepend _tandem_cudnn_cuda
  if [ "$quiet" != "-q" ]; then
    echo "gpu_env: found${found:- nothing} (this build: CUDA $want)"
    [ -n "$skipped" ] && echo "gpu_env: passed over:$skipped"
    [ -n "$missing" ] && echo "gpu_env: not found:$missing (cuDNN: pip install nvidia-cudnn-cu13," \
      "or the cudnn9-cuda-13 package; NCCL only matters for several GPUs)"
    echo "gpu_env: LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  fi
  return 0
}
_tandem_gpu_env "${1:-}"
unset -f _tandem_gpu_env
