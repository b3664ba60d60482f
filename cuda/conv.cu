// Convolution forward, backward data and backward filter through cuDNN (algorithm chosen once per
// shape).
//
// 16 bits: where x and y (dy and dx backward; dy and x for the weight gradient) are both bf16 or
// both fp16, the convolution computes in that type with fp32 accumulation, on NHWC tensors and a
// (K,R,S,C) filter of that type rounded from the fp32 weights on every call (the weights change
// every step; the copy is small), through a stand-in (StandIn) of the compute form. The model's
// first convolution, which reads the fp32 input, computes in fp32 as the CPU's does: cuDNN's
// 16-bit NHWC kernels want channels in multiples of 8 and an image has 1 or 3, the layer is a
// small part of the work, and its weight gradient then needs no 16-bit rounding; its output (and
// the gradient it gets) are converted once.
#include <algorithm>
#include <memory>
#include <vector>

#include "cuda/conv_algo.h"
#include "cuda/cuda_backend_impl.h"

namespace tandem {

std::string conv_fwd_algo_name(cudnnConvolutionFwdAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM:
      return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM:
      return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM:
      return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT:
      return "DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT:
      return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING:
      return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD:
      return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED:
      return "WINOGRAD_NONFUSED";
    default:
      return "algo " + std::to_string(static_cast<int>(a));
  }
}

std::string conv_bwd_data_algo_name(cudnnConvolutionBwdDataAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0:
      return "ALGO_0";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1:
      return "ALGO_1";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT:
      return "FFT";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING:
      return "FFT_TILING";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD:
      return "WINOGRAD";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED:
      return "WINOGRAD_NONFUSED";
    default:
      return "algo " + std::to_string(static_cast<int>(a));
  }
}

std::string conv_bwd_filter_algo_name(cudnnConvolutionBwdFilterAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0:
      return "ALGO_0";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1:
      return "ALGO_1";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT:
      return "FFT";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3:
      return "ALGO_3";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED:
      return "WINOGRAD_NONFUSED";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING:
      return "FFT_TILING";
    default:
      return "algo " + std::to_string(static_cast<int>(a));
  }
}

namespace {

static_assert(CUDNN_DEFAULT_MATH == static_cast<int>(ConvMath::kDefault) &&
              CUDNN_TENSOR_OP_MATH == static_cast<int>(ConvMath::kTensorOp) &&
              CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION ==
                  static_cast<int>(ConvMath::kTensorOpAllowConversion) &&
              CUDNN_FMA_MATH == static_cast<int>(ConvMath::kFma));

cudnnMathType_t to_cudnn(ConvMath m) { return static_cast<cudnnMathType_t>(static_cast<int>(m)); }

[[noreturn]] void no_algorithm(const char* pass, const ConvEntry& e, const BackendOptions& o) {
  throw DeviceError(std::string("cuDNN offers no ") + pass + " algorithm for conv2d " + e.shape +
                        " within the workspace limit of " + format_bytes(o.workspace_bytes) +
                        (o.deterministic ? " among the deterministic ones" : ""),
                    "raise the GPU workspace limit" +
                        std::string(o.deterministic ? " or turn deterministic off" : "") +
                        (is_16bit(e.dtype) ? ", use --precision fp32" : "") +
                        ", or use --device cpu");
}

// Whether the entry's passes may use tensor-op math (conv_algo.h): TF32 for fp32 data when the
// options allow it, always for bf16 and fp16 data.
bool tensor_ops(const CudaBackend& be, const ConvEntry& e) {
  return conv_tensor_ops(be.options().tf32, is_16bit(e.dtype));
}

// Gathers the pass's candidates from cuDNN's results (`got` of `perf`) into *c, in the order they
// are tried (conv_candidate_order); `workspace_of(algo, &bytes)` is the pass's workspace query,
// asked with each candidate's run math type set on the descriptor, since the size depends on it.
// `accumulate_once`: a 16-bit weight gradient, whose deterministic candidates come first.
template <typename Perf, typename Query>
void gather(const CudaBackend& be, const ConvEntry& e, const std::vector<Perf>& perf, int got,
            Query workspace_of, bool accumulate_once, ConvPass* c) {
  const BackendOptions& o = be.options();
  const bool ops = tensor_ops(be, e);
  std::vector<ConvCandidate> ranked(static_cast<size_t>(got));
  for (int i = 0; i < got; ++i) {
    ConvCandidate& r = ranked[i];
    r.deterministic = perf[i].determinism == CUDNN_DETERMINISTIC;
    r.math = static_cast<ConvMath>(static_cast<int>(perf[i].mathType));
    r.ok = perf[i].status == CUDNN_STATUS_SUCCESS &&
           cudnnSetConvolutionMathType(e.conv, to_cudnn(conv_run_math(r.math, ops))) ==
               CUDNN_STATUS_SUCCESS &&
           workspace_of(perf[i].algo, &r.workspace) == CUDNN_STATUS_SUCCESS;
  }
  c->algos.clear(), c->maths.clear(), c->workspaces.clear();
  for (int i :
       conv_candidate_order(ranked, o.deterministic, ops, o.workspace_bytes, accumulate_once)) {
    c->algos.push_back(static_cast<int>(perf[i].algo));
    c->maths.push_back(to_cudnn(conv_run_math(ranked[i].math, ops)));
    c->workspaces.push_back(ranked[i].workspace);
  }
  c->at = 0;
  c->ran = false;
  c->ranked = true;
  // Tests (BackendOptions::conv16_in_fp32): a 16-bit pass as if cuDNN offered it nothing.
  if (o.conv16_in_fp32 && is_16bit(e.dtype)) c->at = c->algos.size();
}

// The descriptor's math type for cuDNN's ranking (conv_entry's): the pass run before may have
// left its own. 16-bit data: TENSOR_OP_MATH, so that the ranking offers tensor-core kernels.
void rank_with_base_math(const CudaBackend& be, const ConvEntry& e) {
  CUDNN_CHECK(cudnnSetConvolutionMathType(e.conv, is_16bit(e.dtype)   ? CUDNN_TENSOR_OP_MATH
                                                  : be.options().tf32 ? CUDNN_DEFAULT_MATH
                                                                      : CUDNN_FMA_MATH));
}

// The largest workspace, within the limit, that any of the pass's `count` algorithms asks for
// (the one the timed search needs: an algorithm that does not get its workspace is not run).
template <typename Algo, typename Query>
size_t search_workspace(int count, size_t limit, Query workspace_of) {
  size_t most = 0;
  for (int i = 0; i < count; ++i) {
    size_t bytes = 0;
    if (workspace_of(static_cast<Algo>(i), &bytes) == CUDNN_STATUS_SUCCESS && bytes <= limit)
      most = std::max(most, bytes);
  }
  return most;
}

// cuDNN's ranked results for one pass into *perf and *got. With options().find_conv_algorithms,
// timed: cudnnFind*Ex runs every candidate once on the call's own buffers (its outputs are
// overwritten by the call that follows) within the workspace limit, fastest first, as PyTorch's
// cudnn.benchmark does. Otherwise, or when the search fails, cuDNN's heuristic ranking
// (cudnnGet*_v7: no trial runs, so the choice does not depend on timing noise). Returns whether
// the ranking is timed.
template <typename Perf, typename Find, typename Heuristic, typename Query>
bool rank(CudaBackend& be, const ConvEntry& e, const char* pass, int max_count, Find find,
          Heuristic heuristic, Query workspace_of, std::vector<Perf>* perf, int* got) {
  perf->assign(static_cast<size_t>(max_count), Perf{});
  *got = 0;
  rank_with_base_math(be, e);
  if (be.options().find_conv_algorithms) {
    cudnnStatus_t status = CUDNN_STATUS_ALLOC_FAILED;
    const size_t bytes = search_workspace<decltype(Perf{}.algo)>(
        max_count, be.options().workspace_bytes, workspace_of);
    try {
      std::shared_ptr<void> ws = bytes ? be.scratch(bytes) : nullptr;  // back to the pool after
      status = find(ws.get(), bytes, max_count, got, perf->data());
    } catch (const DeviceError&) {  // that much device memory is not free: rank without trials
    }
    if (status == CUDNN_STATUS_SUCCESS && *got > 0) return true;
    log_warning(std::string("cuDNN's timed ") + pass + " algorithm search for conv2d " + e.shape +
                " failed (" +
                (status == CUDNN_STATUS_SUCCESS ? "no result" : cudnnGetErrorString(status)) +
                "); taking its heuristic ranking");
    rank_with_base_math(be, e);
  }
  CUDNN_CHECK(heuristic(max_count, got, perf->data()));
  return false;
}

void choose_fwd(CudaBackend& be, ConvEntry& e, const void* x, const void* w, void* y) {
  int max_count = 0, got = 0;
  CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(be.cudnn(), &max_count));
  auto query = [&](cudnnConvolutionFwdAlgo_t a, size_t* ws) {
    return cudnnGetConvolutionForwardWorkspaceSize(be.cudnn(), e.x, e.w, e.conv, e.y, a, ws);
  };
  std::vector<cudnnConvolutionFwdAlgoPerf_t> perf;
  e.fwd.timed = rank(
      be, e, "forward", max_count,
      [&](void* ws, size_t bytes, int count, int* n, cudnnConvolutionFwdAlgoPerf_t* out) {
        return cudnnFindConvolutionForwardAlgorithmEx(be.cudnn(), e.x, x, e.w, w, e.conv, e.y, y,
                                                      count, n, out, ws, bytes);
      },
      [&](int count, int* n, cudnnConvolutionFwdAlgoPerf_t* out) {
        return cudnnGetConvolutionForwardAlgorithm_v7(be.cudnn(), e.x, e.w, e.conv, e.y, count, n,
                                                      out);
      },
      query, &perf, &got);
  gather(be, e, perf, got, query, false, &e.fwd);
}

void choose_bwd_data(CudaBackend& be, ConvEntry& e, const void* w, const void* dy, void* dx) {
  int max_count = 0, got = 0;
  CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(be.cudnn(), &max_count));
  auto query = [&](cudnnConvolutionBwdDataAlgo_t a, size_t* ws) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(be.cudnn(), e.w, e.y, e.conv, e.x, a, ws);
  };
  std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf;
  e.bwd_data.timed = rank(
      be, e, "backward-data", max_count,
      [&](void* ws, size_t bytes, int count, int* n, cudnnConvolutionBwdDataAlgoPerf_t* out) {
        return cudnnFindConvolutionBackwardDataAlgorithmEx(be.cudnn(), e.w, w, e.y, dy, e.conv, e.x,
                                                           dx, count, n, out, ws, bytes);
      },
      [&](int count, int* n, cudnnConvolutionBwdDataAlgoPerf_t* out) {
        return cudnnGetConvolutionBackwardDataAlgorithm_v7(be.cudnn(), e.w, e.y, e.conv, e.x, count,
                                                           n, out);
      },
      query, &perf, &got);
  gather(be, e, perf, got, query, false, &e.bwd_data);
}

void choose_bwd_filter(CudaBackend& be, ConvEntry& e, const void* x, const void* dy, void* dw) {
  int max_count = 0, got = 0;
  CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(be.cudnn(), &max_count));
  auto query = [&](cudnnConvolutionBwdFilterAlgo_t a, size_t* ws) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(be.cudnn(), e.x, e.y, e.conv, e.w, a, ws);
  };
  std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf;
  e.bwd_filter.timed = rank(
      be, e, "backward-filter", max_count,
      [&](void* ws, size_t bytes, int count, int* n, cudnnConvolutionBwdFilterAlgoPerf_t* out) {
        return cudnnFindConvolutionBackwardFilterAlgorithmEx(be.cudnn(), e.x, x, e.y, dy, e.conv,
                                                             e.w, dw, count, n, out, ws, bytes);
      },
      [&](int count, int* n, cudnnConvolutionBwdFilterAlgoPerf_t* out) {
        return cudnnGetConvolutionBackwardFilterAlgorithm_v7(be.cudnn(), e.x, e.y, e.conv, e.w,
                                                             count, n, out);
      },
      query, &perf, &got);
  gather(be, e, perf, got, query, is_16bit(e.dtype), &e.bwd_filter);
}

// Runs the pass with its candidate in use, `call(algo, workspace, bytes)` being the cuDNN call;
// a candidate cuDNN refuses at its first call is passed over for the next (conv_takes_next), with
// a warning. Returns false when none is left: the caller falls back to fp32 (16-bit data) or
// refuses (conv_when_none_left).
template <typename Call>
bool run_pass(CudaBackend& be, ConvEntry& e, ConvPass& c, const char* pass,
              std::string (*algo_name)(int), Call call) {
  while (!c.none_left()) {
    void* ws = be.workspace(c.workspace());
    CUDNN_CHECK(cudnnSetConvolutionMathType(e.conv, c.math()));  // one descriptor, three passes
    const cudnnStatus_t status = call(c.algo(), ws, c.workspace());
    if (status == CUDNN_STATUS_SUCCESS) {
      c.ran = true;
      return true;
    }
    // cuDNN 9 reports a refusal by its category: NOT_SUPPORTED_SHAPE, _LAYOUT, ... are 30xx.
    const int category = CUDNN_STATUS_CATEGORY(static_cast<int>(status));
    const ConvCall answer =
        category == CUDNN_STATUS_NOT_SUPPORTED || category == CUDNN_STATUS_EXECUTION_FAILED
            ? ConvCall::kRefused
            : ConvCall::kFailed;
    if (!conv_takes_next(answer, c.ran)) CUDNN_CHECK(status);
    log_warning(std::string("cuDNN refused its ") + pass + " algorithm " + algo_name(c.algo()) +
                " for conv2d " + e.shape + " (" + cudnnGetErrorString(status) +
                "); taking the next one it ranked");
    ++c.at;
  }
  return false;
}

std::string fwd_name(int a) {
  return conv_fwd_algo_name(static_cast<cudnnConvolutionFwdAlgo_t>(a));
}
std::string bwd_data_name(int a) {
  return conv_bwd_data_algo_name(static_cast<cudnnConvolutionBwdDataAlgo_t>(a));
}
std::string bwd_filter_name(int a) {
  return conv_bwd_filter_algo_name(static_cast<cudnnConvolutionBwdFilterAlgo_t>(a));
}

// A pass whose candidates are used up: 16-bit data marks it to compute in fp32 from now on (and
// says so once, and in --log-placement); fp32 data is refused with the fix.
void none_left(CudaBackend& be, ConvEntry& e, ConvPass& c, const char* pass) {
  if (conv_when_none_left(is_16bit(e.dtype)) == ConvFallback::kRefuse)
    no_algorithm(pass, e, be.options());
  c.fp32 = true;
  if (!be.options().conv16_in_fp32)
    log_warning(std::string("cuDNN offers no ") + dtype_name(e.dtype) + " " + pass +
                " algorithm for conv2d " + e.shape +
                ": that pass computes in fp32 on converted "
                "copies (slower; the results are as accurate)");
}

// The compute form of a convolution whose activations are a and b (x and y forward, dy and dx
// backward data, dy and x for the weight gradient): their 16-bit dtype in NHWC where both have
// it, else fp32 NCHW (the first convolution, whose x is the model's fp32 input).
struct ConvForm {
  DType dtype;
  Layout layout;
};
ConvForm conv_form(const Tensor& a, const Tensor& b) {
  if (is_16bit(a.dtype()) && a.dtype() == b.dtype()) return {a.dtype(), Layout::kChannelsLast};
  return {DType::kF32, Layout::kPlain};
}

// ", BF16 data, tensor-op math": the placement's note of a 16-bit pass run with `math`.
std::string math_16bit(const ConvEntry& e, cudnnMathType_t math) {
  const char* kind = math == CUDNN_TENSOR_OP_MATH || math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION
                         ? "tensor-op"
                     : math == CUDNN_FMA_MATH ? "FMA"
                                              : "default";
  return std::string(e.dtype == DType::kBF16 ? ", BF16" : ", FP16") + " " + kind +
         " math (fp32 accumulation)";
}

}  // namespace

std::string CudaBackend::conv_placement(const char* pass, const ConvEntry& e, const ConvPass& c,
                                        const std::string& algo) const {
  return "conv2d " + std::string(pass) + " " + e.shape + " -> cuDNN " + algo +
         (c.timed ? " (timed)" : " (heuristic)") + ", workspace " + format_bytes(c.workspace()) +
         (is_16bit(e.dtype) ? math_16bit(e, c.math())
          : options_.tf32   ? ", TF32"
                            : ", FP32") +
         (options_.deterministic ? ", deterministic" : "") +
         (c.at > 0 ? ", candidate " + std::to_string(c.at + 1) + " (cuDNN refused those before it)"
                   : "");
}

namespace {

constexpr ConvForm kFp32Form{DType::kF32, Layout::kPlain};

// ", in fp32: ..." for the placement line of a pass that a 16-bit run computes in fp32 (the entry
// whose candidates were used up), "" otherwise.
std::string fp32_note(const ConvEntry* low) {
  return low ? std::string(", in fp32 on converted copies: cuDNN offers no ") +
                   dtype_name(low->dtype) + " algorithm for " + low->shape
             : "";
}

// The form `pass` of the convolution (x, w, y) computes in: the tensors' (f), or fp32 once that
// pass of the 16-bit shape has run out of algorithms, *low then being the 16-bit entry.
ConvForm pass_form(CudaBackend& be, ConvForm f, const Tensor& x, const Tensor& w, const Tensor& y,
                   const Conv2dParams& p, ConvPass ConvEntry::*pass, const ConvEntry** low) {
  *low = nullptr;
  if (!is_16bit(f.dtype)) return f;
  ConvEntry& e16 = be.conv_entry(x, w, y, p, f.dtype);
  if (!(e16.*pass).fp32) return f;
  *low = &e16;
  return kFp32Form;
}

}  // namespace

// x (N,C,H,W), w (K,C,R,S), b (K) or null -> y (N,K,P,Q).
void CudaBackend::conv2d_forward(Tensor& y, const Tensor& x, const Tensor& w, const Tensor* b,
                                 const Conv2dParams& p) {
  if (b) expect_numel(*b, w.dim(0), "conv2d bias");
  const ConvEntry* low = nullptr;  // the 16-bit entry, when this pass computes in fp32
  const ConvForm f = pass_form(*this, conv_form(x, y), x, w, y, p, &ConvEntry::fwd, &low);
  ConvEntry& e = conv_entry(x, w, y, p, f.dtype);
  // In fp32 (every tensor fp32 plain) each stand-in is its tensor: no copy.
  StandIn sx(*this, x, f.dtype, f.layout, true, false),
      sw(*this, w, f.dtype, f.layout, true, false), sy(*this, y, f.dtype, f.layout, false, true);
  if (!e.fwd.ranked) choose_fwd(*this, e, sx.get().raw(), sw.get().raw(), sy.get().raw());
  const float one = 1.f, zero = 0.f;
  if (!run_pass(*this, e, e.fwd, "forward", fwd_name, [&](int algo, void* ws, size_t bytes) {
        return cudnnConvolutionForward(cudnn_, &one, e.x, sx.get().raw(), e.w, sw.get().raw(),
                                       e.conv, static_cast<cudnnConvolutionFwdAlgo_t>(algo), ws,
                                       bytes, &zero, e.y, sy.get().raw());
      })) {
    none_left(*this, e, e.fwd, "forward");
    return conv2d_forward(y, x, w, b, p);  // the pass in fp32 now
  }
  if (tracing()) placed(conv_placement("fwd", e, e.fwd, fwd_name(e.fwd.algo())) + fp32_note(low));
  if (!is_16bit(f.dtype)) {
    if (b) CUDNN_CHECK(cudnnAddTensor(cudnn_, &one, e.bias, b->data(), &one, e.y, sy.get().raw()));
    return sy.finish();
  }
  // 16 bits: the fp32 bias is added to y itself (whatever its form) by bias_add's 16-bit kernel
  // (fp32 arithmetic) rather than by cudnnAddTensor across two dtypes: a second rounding of y, as
  // PyTorch's cuDNN convolutions add their bias to their 16-bit output too.
  sy.finish();
  if (b) bias_add(y, *b);
}

// dx (N,C,H,W) from dy (N,K,P,Q) and w (K,C,R,S).
void CudaBackend::conv2d_backward_data(Tensor& dx, const Tensor& dy, const Tensor& w,
                                       const Conv2dParams& p) {
  const ConvEntry* low = nullptr;  // the 16-bit entry, when this pass computes in fp32
  const ConvForm f = pass_form(*this, conv_form(dy, dx), dx, w, dy, p, &ConvEntry::bwd_data, &low);
  ConvEntry& e = conv_entry(dx, w, dy, p, f.dtype);
  StandIn sdy(*this, dy, f.dtype, f.layout, true, false),
      sw(*this, w, f.dtype, f.layout, true, false), sdx(*this, dx, f.dtype, f.layout, false, true);
  if (!e.bwd_data.ranked)
    choose_bwd_data(*this, e, sw.get().raw(), sdy.get().raw(), sdx.get().raw());
  const float one = 1.f, zero = 0.f;
  if (!run_pass(*this, e, e.bwd_data, "backward-data", bwd_data_name,
                [&](int algo, void* ws, size_t bytes) {
                  return cudnnConvolutionBackwardData(
                      cudnn_, &one, e.w, sw.get().raw(), e.y, sdy.get().raw(), e.conv,
                      static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), ws, bytes, &zero, e.x,
                      sdx.get().raw());
                })) {
    none_left(*this, e, e.bwd_data, "backward-data");
    return conv2d_backward_data(dx, dy, w, p);
  }
  if (tracing())
    placed(conv_placement("bwd_data", e, e.bwd_data, bwd_data_name(e.bwd_data.algo())) +
           fp32_note(low));
  sdx.finish();
}

// dw (K,C,R,S) from dy (N,K,P,Q) and x (N,C,H,W); overwrites dw.
//
// 16 bits: cuDNN's convolution API takes the filter gradient only in the type of x and dy (its
// PSEUDO_HALF / PSEUDO_BFLOAT16 configurations), so dw is computed, with fp32 accumulation, into
// a 16-bit (K,R,S,C) stand-in and converted into the fp32 dw: rounded to 16 bits once, as
// PyTorch's autocast convolutions also return their weight gradient in 16 bits. The deterministic
// candidates are tried first, since they round each weight once (conv_candidate_order).
void CudaBackend::conv2d_backward_filter(Tensor& dw, const Tensor& dy, const Tensor& x,
                                         const Conv2dParams& p) {
  const ConvEntry* low = nullptr;  // the 16-bit entry, when this pass computes in fp32
  const ConvForm f = pass_form(*this, conv_form(dy, x), x, dw, dy, p, &ConvEntry::bwd_filter, &low);
  ConvEntry& e = conv_entry(x, dw, dy, p, f.dtype);
  StandIn sx(*this, x, f.dtype, f.layout, true, false),
      sdy(*this, dy, f.dtype, f.layout, true, false),
      sdw(*this, dw, f.dtype, f.layout, false, true);
  if (!e.bwd_filter.ranked)
    choose_bwd_filter(*this, e, sx.get().raw(), sdy.get().raw(), sdw.get().raw());
  const float one = 1.f, zero = 0.f;
  if (!run_pass(*this, e, e.bwd_filter, "backward-filter", bwd_filter_name,
                [&](int algo, void* ws, size_t bytes) {
                  return cudnnConvolutionBackwardFilter(
                      cudnn_, &one, e.x, sx.get().raw(), e.y, sdy.get().raw(), e.conv,
                      static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), ws, bytes, &zero, e.w,
                      sdw.get().raw());
                })) {
    none_left(*this, e, e.bwd_filter, "backward-filter");
    return conv2d_backward_filter(dw, dy, x, p);
  }
  if (tracing())
    placed(conv_placement("bwd_filter", e, e.bwd_filter, bwd_filter_name(e.bwd_filter.algo())) +
           fp32_note(low));
  sdw.finish();
}

}  // namespace tandem
