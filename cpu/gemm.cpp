// Matrix multiply c = alpha * op(a) * op(b) + beta * c on the CPU through oneDNN's matmul.
//
// A matmul primitive (brg:avx512_core on an AVX-512 CPU, gemm:jit on an AVX2 one) is cached per
// shape, transposes, alpha and beta; a transpose is only a stride order (tag ba), so no operand
// is copied. Not dnnl_sgemm: its (N,T) case - every dense forward, x * W^T - runs at half speed
// when K is 1024 (190 vs 400 GFLOP/s on 2 AVX-512 cores, 128x1024x1024); the other cases
// measured as fast or faster.
//
// 16-bit: where one of a, b, c is bf16 the product is computed in bf16 with fp32 accumulation
// (brg:avx512_core_bf16), as autocast does; an fp32 operand (a dense layer's weights, the
// logits' gradient) is rounded to bf16 into a buffer of the cached entry first, and c is written
// in its own dtype (a weight gradient in fp32).
#include <cstdio>
#include <string>

#include "cpu/cpu_backend_impl.h"

namespace tandem {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
constexpr auto kF32 = memory::data_type::f32;

struct GemmEntry : CpuCacheEntry {
  dnnl::matmul prim;
  memory::desc scratch_md;
  memory c;
  LayoutBridge a16, b16;  // fp32 operands of a 16-bit product, rounded (no-ops otherwise)
};

// (rows, cols) stored row-major, or its transpose: the same memory read column by column.
memory::desc operand_desc(int64_t rows, int64_t cols, bool transposed,
                          memory::data_type dt = kF32) {
  return memory::desc({rows, cols}, dt, transposed ? tag::ba : tag::ab);
}

}  // namespace

// c (M,N) = alpha * op(a) (M,K) * op(b) (K,N) + beta * c; a is (M,K) or (K,M) when trans_a.
void CpuBackend::gemm(Tensor& c, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b,
                      float alpha, float beta) {
  TANDEM_CHECK(a.shape().rank() == 2 && b.shape().rank() == 2 && c.shape().rank() == 2,
               "gemm wants 2-D tensors");
  const int64_t M = c.dim(0), N = c.dim(1);
  const int64_t K = trans_a ? a.dim(0) : a.dim(1);
  TANDEM_CHECK((trans_a ? a.dim(1) : a.dim(0)) == M && (trans_b ? b.dim(1) : b.dim(0)) == K &&
                   (trans_b ? b.dim(0) : b.dim(1)) == N,
               "gemm shapes " + a.shape().str() + (trans_a ? "^T" : "") + " * " + b.shape().str() +
                   (trans_b ? "^T" : "") + " -> " + c.shape().str());
  if (M == 0 || N == 0) return;
  const bool low = is_16bit(a.dtype()) || is_16bit(b.dtype()) || is_16bit(c.dtype());
  if (K == 0) {  // an empty product: oneDNN does not take zero-sized operands here
    F32Stage sc(*this, c, beta != 0.f, true);
    float* cp = sc.f32().data();
    for (int64_t i = 0; i < M * N; ++i) cp[i] = beta == 0.f ? 0.f : beta * cp[i];
    return sc.finish();
  }
  // A short key, built on every call: this op runs several times a step.
  const DType ct = !low                  ? DType::kF32
                   : is_16bit(a.dtype()) ? a.dtype()
                   : is_16bit(b.dtype()) ? b.dtype()
                                         : c.dtype();
  char key[128];
  std::snprintf(key, sizeof key, "gemm %lldx%lldx%lld%s%s a%.9g b%.9g%s%s%s%s",
                static_cast<long long>(M), static_cast<long long>(N), static_cast<long long>(K),
                trans_a ? " A^T" : "", trans_b ? " B^T" : "", alpha, beta, low ? " " : "",
                low ? dtype_name(a.dtype()) : "", low ? dtype_name(b.dtype()) : "",
                low ? dtype_name(c.dtype()) : "");
  auto& e = cached<GemmEntry>(key, [&] {
    return dnnl_guard(key, [&] {
      auto e = std::make_unique<GemmEntry>();
      const memory::data_type dt = dnnl_dtype(ct);
      memory::desc a_md = operand_desc(M, K, trans_a, dt), b_md = operand_desc(K, N, trans_b, dt);
      memory::desc c_md = operand_desc(M, N, false, dnnl_dtype(c.dtype()));
      // The operands as stored; a bridge rounds an fp32 one to the compute type.
      e->a16 = LayoutBridge(*this, operand_desc(M, K, trans_a, dnnl_dtype(a.dtype())), a_md, true);
      e->b16 = LayoutBridge(*this, operand_desc(K, N, trans_b, dnnl_dtype(b.dtype())), b_md, true);
      dnnl::primitive_attr attr = scratchpad_attr();
      if (alpha != 1.f) attr.set_output_scales(0, {alpha});
      // Without a sum post-op c is only written, so beta 0 ignores NaN in its old contents.
      if (beta != 0.f) {
        dnnl::post_ops po;
        po.append_sum(beta);
        attr.set_post_ops(po);
      }
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), attr, engine());
      e->prim = dnnl::matmul(pd);
      e->scratch_md = pd.scratchpad_desc();
      e->c = memory(c_md, engine(), DNNL_MEMORY_NONE);
      e->placement = std::string(key) + " -> matmul " + impl_name(pd) +
                     (e->a16.reorders() ? " (rounds a)" : "") +
                     (e->b16.reorders() ? " (rounds b)" : "");
      return e;
    });
  });
  e.c.set_data_handle(c.raw());
  memory& am = e.a16.bind(a.raw());
  memory& bm = e.b16.bind(b.raw());
  e.a16.run(stream());
  e.b16.run(stream());
  e.prim.execute(stream(), {{DNNL_ARG_SRC, am},
                            {DNNL_ARG_WEIGHTS, bm},
                            {DNNL_ARG_DST, e.c},
                            {DNNL_ARG_SCRATCHPAD, scratchpad(e.scratch_md)}});
  stream().wait();
}

}  // namespace tandem
