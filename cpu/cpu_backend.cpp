// CpuBackend's construction, start-up info, placement log, host memory and registration as "cpu".
#include "cpu/cpu_backend.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "cpu/cpu_backend_impl.h"
#include "engine/backend_registry.h"
#include "engine/progress.h"

namespace tandem {
namespace {

constexpr size_t kAlignment = 64;

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) {
        size_t start = line.find_first_not_of(" \t", colon + 1);
        return start == std::string::npos ? "" : line.substr(start);
      }
    }
  }
  return "unknown CPU";
}

// The memory this machine can still give (MemAvailable of /proc/meminfo); 0 when unknown.
size_t available_host_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("MemAvailable:", 0) == 0)
      return std::strtoull(line.c_str() + 13, nullptr, 10) * 1024;
  return 0;
}

std::string isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx512_mic:
      return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops:
      return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "all";
  }
}

// oneDNN's instruction-set limit, when the environment sets one: DNNL_MAX_CPU_ISA=AVX2 makes a
// CPU with AVX-512 run oneDNN's AVX2 kernels, and tandem's own checks (bf16 below) follow the same
// limit, since they ask oneDNN for the ISA it runs. "" when unset.
std::string isa_limit() {
  const char* limit = std::getenv("DNNL_MAX_CPU_ISA");
  return limit && *limit ? limit : "";
}

// What the effective ISA owes to that limit, for a message: "" without one.
std::string isa_limit_note() {
  const std::string limit = isa_limit();
  return limit.empty() ? ""
                       : ", held there by DNNL_MAX_CPU_ISA=" + limit +
                             ": unset it to use all of the CPU's instructions";
}

// bf16 only where the CPU has bf16 dot products (AVX512-BF16, or AMX): below that oneDNN would
// emulate them, slower than fp32, which is not what a user asking for bf16 wants.
bool cpu_has_bf16() {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  return (isa & bf16) == bf16;
}

}  // namespace

dnnl::memory::desc plain_desc(const dnnl::memory::dims& dims) {
  using tag = dnnl::memory::format_tag;
  static const tag kTags[] = {tag::a, tag::ab, tag::abc, tag::abcd, tag::abcde};
  TANDEM_CHECK(!dims.empty() && dims.size() <= 5,
               "plain_desc of rank " + std::to_string(dims.size()));
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, kTags[dims.size() - 1]);
}

std::string impl_name(const dnnl::primitive_desc_base& pd) {
  const char* s = pd.impl_info_str();
  return s ? s : "unknown";
}

namespace {

// Whether oneDNN runs its AVX-512 kernels here (its fp32 Winograd kernel among them).
bool onednn_avx512() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  return isa == dnnl::cpu_isa::avx512_core || isa == dnnl::cpu_isa::avx512_core_vnni ||
         isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
}

// The blocked order oneDNN's fp32 convolutions choose on this CPU: 16 channels to a block where
// it runs AVX-512 kernels, 8 where AVX2 (DNNL_MAX_CPU_ISA lowers both); plain below that, and
// where TANDEM_CPU_FP32_LAYOUT=plain asks for the plain order (reorders around every
// convolution, as before; for measuring what the blocked order saves).
Layout fp32_image_layout() {
  if (const char* v = std::getenv("TANDEM_CPU_FP32_LAYOUT"); v && std::string(v) == "plain")
    return Layout::kPlain;
  if (onednn_avx512()) return Layout::kBlocked16;
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  if (isa == dnnl::cpu_isa::avx2 || isa == dnnl::cpu_isa::avx2_vnni) return Layout::kBlocked8;
  return Layout::kPlain;
}

}  // namespace

CpuBackend::CpuBackend(int threads, int64_t batch_size, bool winograd)
    : threads_(threads > 0 ? threads : omp_get_num_procs()),
      batch_size_(batch_size),
      winograd_(winograd),
      engine_(dnnl::engine::kind::cpu, 0),
      stream_(engine_),
      stats_(std::make_shared<CpuMemoryStats>()) {
  // oneDNN's OpenMP runtime and our own loops both follow this setting.
  omp_set_num_threads(threads_);
  fp32_images_ = fp32_image_layout();
}

Layout CpuBackend::activation_layout(DType d, const Shape& s) const {
  if (d == DType::kF32 && s.rank() == 4 && fp32_images_ != Layout::kPlain &&
      s[1] % channel_block(fp32_images_) == 0)
    return fp32_images_;
  return Backend::activation_layout(d, s);
}

InfoRows CpuBackend::info() const {
  const dnnl_version_t* v = dnnl_version();
  return {
      {"Device", "CPU"},
      {"CPU", cpu_model_name()},
      {"Cores", std::to_string(omp_get_num_procs())},
      // More threads than cores wait for each other at every barrier: slower, never faster.
      {"Threads", threads_ > omp_get_num_procs()
                      ? fmt::format("{} (more than the {} cores: slower, not faster; try "
                                    "--threads {})",
                                    threads_, omp_get_num_procs(), omp_get_num_procs())
                      : std::to_string(threads_)},
      {"ISA",
       isa_name(dnnl::get_effective_cpu_isa()) +
           (isa_limit().empty() ? "" : " (limited by DNNL_MAX_CPU_ISA=" + isa_limit() + ")")},
      {"bf16", cpu_has_bf16() ? "native (precision: bf16 runs oneDNN's bf16 kernels)"
               : isa_limit().empty()
                   ? "no (no AVX512-BF16 instructions; precision: bf16 is refused)"
                   : "no (no AVX512-BF16 instructions within DNNL_MAX_CPU_ISA=" + isa_limit() +
                         "; precision: bf16 is refused)"},
      {"oneDNN",
       std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch)},
      // cpu/conv.cpp (winograd_pass): oneDNN has its fp32 Winograd kernel on AVX-512 only.
      {"Conv", !winograd_ ? "direct (cpu: {conv_algo: direct})"
               : onednn_avx512()
                   ? "Winograd in fp32 for 3x3 at stride 1 (cpu.conv_algo), else direct"
                   : "direct (oneDNN's Winograd kernels need AVX-512)"},
  };
}

bool CpuBackend::supports_dtype(DType d, std::string* why_not) const {
  if (!is_16bit(d) || (d == DType::kBF16 && cpu_has_bf16())) return true;
  if (why_not)
    *why_not = d == DType::kF16
                   ? "the CPU computes in fp32 or bf16; fp16 is a GPU precision (use bf16)"
                   : "this CPU has no bf16 instructions (oneDNN runs it as " +
                         isa_name(dnnl::get_effective_cpu_isa()) + isa_limit_note() +
                         "; bf16 needs avx512_core_bf16: Cooper Lake, Sapphire Rapids, Zen 4 or "
                         "later), and emulating them would be slower than fp32";
  return false;
}

std::vector<std::string> CpuBackend::placement_log() const {
  std::vector<std::string> lines;
  lines.reserve(cache_order_.size());
  for (const std::string& key : cache_order_) lines.push_back(cache_.at(key)->placement);
  return lines;
}

std::shared_ptr<void> CpuBackend::allocate(size_t bytes) {
  size_t rounded = std::max<size_t>(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (!p) {
    std::string cause = "out of host memory: asked for " + format_bytes(bytes);
    const size_t free = available_host_bytes();
    if (free) cause += ", " + format_bytes(free) + " available";
    // Refused although the machine has it free: a limit of this process's own (ulimit -v).
    if (free > bytes) cause += " to the machine, but this process is held to less (ulimit -v)";
    throw DeviceError(cause, batch_size_ > 1
                                 ? "try --batch-size " +
                                       std::to_string(batch_to_try(batch_size_, bytes, free)) +
                                       " or less (this run's is " + std::to_string(batch_size_) +
                                       "), or a smaller model"
                                 : "use a smaller model (or free some memory)");
  }
  size_t now = stats_->current.fetch_add(rounded) + rounded;
  size_t peak = stats_->peak.load();
  while (now > peak && !stats_->peak.compare_exchange_weak(peak, now)) {
  }
  std::shared_ptr<CpuMemoryStats> stats = stats_;
  return std::shared_ptr<void>(p, [stats, rounded](void* q) {
    stats->current.fetch_sub(rounded);
    std::free(q);
  });
}

void CpuBackend::upload(Tensor& dst, const void* host) {
  if (dst.bytes()) std::memcpy(dst.raw(), host, dst.bytes());
}

void CpuBackend::download(void* host, const Tensor& src) {
  if (src.bytes()) std::memcpy(host, src.raw(), src.bytes());
}

void CpuBackend::fill(Tensor& t, float value) {
  if (is_16bit(t.dtype())) return mixed::fill(t, value);
  float* p = t.data();
  const int64_t n = t.numel();
#pragma omp parallel for simd schedule(static) if (parallel : n > 65536)
  for (int64_t i = 0; i < n; ++i) p[i] = value;
}

void CpuBackend::copy(Tensor& dst, const Tensor& src) {
  TANDEM_CHECK(dst.numel() == src.numel(),
               "copy " + src.shape().str() + " to " + dst.shape().str());
  // Another dtype, or another memory order of a 4-D side: converted, in logical order.
  const bool same_order = (dst.layout() == src.layout() && dst.shape() == src.shape()) ||
                          (dst.layout() == Layout::kPlain && src.layout() == Layout::kPlain);
  if (dst.dtype() != src.dtype() || !same_order) return mixed::convert(*this, dst, src);
  if (dst.raw() != src.raw() && src.bytes()) std::memcpy(dst.raw(), src.raw(), src.bytes());
}

dnnl::primitive_attr CpuBackend::scratchpad_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

dnnl::memory CpuBackend::scratchpad(const dnnl::memory::desc& md) {
  size_t need = std::max<size_t>(md.get_size(), 1);
  if (need > scratch_bytes_) {
    scratch_ = allocate(need);
    scratch_bytes_ = need;
  }
  return dnnl::memory(md, engine_, scratch_.get());
}

LayoutBridge::LayoutBridge(CpuBackend& backend, const dnnl::memory::desc& plain_md,
                           const dnnl::memory::desc& chosen_md, bool to_chosen)
    : reorder_needed_(plain_md != chosen_md), to_chosen_(to_chosen) {
  plain_ = dnnl::memory(plain_md, backend.engine(), DNNL_MEMORY_NONE);
  if (!reorder_needed_) return;
  buffer_ = backend.allocate(chosen_md.get_size());
  chosen_ = dnnl::memory(chosen_md, backend.engine(), buffer_.get());
  reorder_ = to_chosen ? dnnl::reorder(plain_, chosen_) : dnnl::reorder(chosen_, plain_);
}

dnnl::memory& LayoutBridge::bind(const void* ptr) {
  plain_.set_data_handle(const_cast<void*>(ptr));
  return reorder_needed_ ? chosen_ : plain_;
}

void LayoutBridge::run(dnnl::stream& s) {
  if (!reorder_needed_) return;
  if (to_chosen_) {
    reorder_.execute(s, plain_, chosen_);
  } else {
    reorder_.execute(s, chosen_, plain_);
  }
}

std::unique_ptr<Backend> make_cpu_backend(int threads, int64_t batch_size, bool winograd) {
#ifdef TANDEM_CPU_AVX2
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
    throw DeviceError(
        "this CPU has no AVX2 with FMA, which this build's CPU kernels are compiled for",
        "rebuild with cmake -DTANDEM_CPU_AVX2=OFF (make CMAKE_FLAGS=-DTANDEM_CPU_AVX2=OFF) "
        "for any x86-64 CPU");
#endif
  return std::make_unique<CpuBackend>(threads, batch_size, winograd);
}

void register_cpu_backend() {
  register_backend("cpu", [](const BackendOptions& o) {
    return make_cpu_backend(o.threads, o.batch_size, o.cpu_winograd);
  });
}

}  // namespace tandem
