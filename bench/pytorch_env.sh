# Sourced by the comparison scripts: sets PT_ENV, the environment PyTorch runs in, with OpenBLAS's
# kernel chosen for this CPU, PT_CPU, the CPU in words (model, vector ISA, cores), and
# PT_ENV_NOTE, a line that names the CPU and the kernel chosen, and why.
#
# OpenBLAS' DYNAMIC_ARCH build picks its kernel by CPUID, and some versions pick wrong on newer
# CPUs (a generic kernel, several times slower); forcing one it cannot run kills PyTorch at its
# first matrix product with SIGILL. So the kernel follows the CPU's own flags:
#   SkylakeX  where AVX-512 (F, BW, DQ, VL) is,
#   Zen       on an AMD CPU with AVX2 and no AVX-512,
#   Haswell   on any other CPU with AVX2 and FMA,
#   (none)    below that: OpenBLAS detects it itself.
# PT_CORETYPE=NAME overrides the choice (PT_CORETYPE=auto: leave it to OpenBLAS); PT_CPUINFO
# reads another CPU's /proc/cpuinfo (to check the choice for a CPU this machine is not).
# LD_LIBRARY_PATH puts Debian's OpenMP build of OpenBLAS first, where both builds are installed.
# keep_only_runs: with ONLY set (config names), the caller's RUNS ("config batch steps" entries)
# keep those configs alone.

pt_cpuinfo=${PT_CPUINFO:-/proc/cpuinfo}
pt_cpu_flags=" $(grep -m1 '^flags' "$pt_cpuinfo" 2>/dev/null | cut -d: -f2) "
pt_cpu_vendor=$(grep -m1 '^vendor_id' "$pt_cpuinfo" 2>/dev/null | cut -d: -f2 | tr -d ' ')
pt_cpu_model=$(grep -m1 '^model name' "$pt_cpuinfo" 2>/dev/null | cut -d: -f2- | sed 's/^ *//')
pt_has() { [[ $pt_cpu_flags == *" $1 "* ]]; }

if [[ -n ${PT_CORETYPE:-} ]]; then
  PT_CORETYPE_WHY="set by PT_CORETYPE"
elif pt_has avx512f && pt_has avx512bw && pt_has avx512dq && pt_has avx512vl; then
  PT_CORETYPE=SkylakeX PT_CORETYPE_WHY="the CPU has AVX-512"
elif pt_has avx2 && pt_has fma && [[ $pt_cpu_vendor == AuthenticAMD ]]; then
  PT_CORETYPE=Zen PT_CORETYPE_WHY="an AMD CPU with AVX2, no AVX-512"
elif pt_has avx2 && pt_has fma; then
  PT_CORETYPE=Haswell PT_CORETYPE_WHY="AVX2 and FMA, no AVX-512"
else
  PT_CORETYPE=auto PT_CORETYPE_WHY="no AVX2: OpenBLAS picks its own kernel"
fi

# Used as: env "${PT_ENV[@]}" python3 ...
PT_ENV=(LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH})
if [[ $PT_CORETYPE == auto ]]; then
  PT_ENV=(-u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "${PT_ENV[@]}")
else
  PT_ENV+=(OPENBLAS_CORETYPE="$PT_CORETYPE")
fi
if pt_has avx512_bf16; then pt_isa="AVX-512 with BF16"
elif pt_has avx512f; then pt_isa="AVX-512"
elif pt_has avx2; then pt_isa="AVX2"
else pt_isa="no AVX2"; fi
PT_CPU="${pt_cpu_model:-unknown CPU} ($pt_isa, $(nproc) cores)"
PT_ENV_NOTE="CPU: $PT_CPU; PyTorch's OpenBLAS kernel: $PT_CORETYPE ($PT_CORETYPE_WHY)"
unset pt_isa pt_cpuinfo pt_cpu_flags pt_cpu_vendor pt_cpu_model
unset -f pt_has

keep_only_runs() {
  [[ -n ${ONLY:-} ]] || return 0
  local kept=() run name
  for run in "${RUNS[@]}"; do
    for name in $ONLY; do [[ ${run%% *} == "$name" ]] && kept+=("$run"); done
  done
  RUNS=("${kept[@]}")
}
