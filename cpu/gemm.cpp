// Matrix multiply c = alpha * op(a) * op(b) + beta * c on the CPU through oneDNN's matmul.
//
// A matmul primitive (brg:avx512_core) is cached per shape, transposes, alpha and beta; a
// transpose is only a stride order (tag ba), so no operand is copied. Not dnnl_sgemm: its (N,T)
// case - every dense forward, x * W^T - runs at half speed when K is 1024 (190 vs 400 GFLOP/s on
// 2 AVX-512 cores, 128x1024x1024); the other cases measured as fast or faster.
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
  memory a, b, c;
};

// (rows, cols) stored row-major, or its transpose: the same memory read column by column.
memory::desc operand_desc(int64_t rows, int64_t cols, bool transposed) {
  return memory::desc({rows, cols}, kF32, transposed ? tag::ba : tag::ab);
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
  if (K == 0) {  // an empty product: oneDNN does not take zero-sized operands here
    float* cp = c.data();
    for (int64_t i = 0; i < M * N; ++i) cp[i] = beta == 0.f ? 0.f : beta * cp[i];
    return;
  }
  // A short key, built on every call: this op runs several times a step.
  char key[96];
  std::snprintf(key, sizeof key, "gemm %lldx%lldx%lld%s%s a%.9g b%.9g", static_cast<long long>(M),
                static_cast<long long>(N), static_cast<long long>(K), trans_a ? " A^T" : "",
                trans_b ? " B^T" : "", alpha, beta);
  auto& e = cached<GemmEntry>(key, [&] {
    return dnnl_guard(key, [&] {
      auto e = std::make_unique<GemmEntry>();
      memory::desc a_md = operand_desc(M, K, trans_a), b_md = operand_desc(K, N, trans_b);
      memory::desc c_md = operand_desc(M, N, false);
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
      e->a = memory(a_md, engine(), DNNL_MEMORY_NONE);
      e->b = memory(b_md, engine(), DNNL_MEMORY_NONE);
      e->c = memory(c_md, engine(), DNNL_MEMORY_NONE);
      e->placement = std::string(key) + " -> matmul " + impl_name(pd);
      return e;
    });
  });
  e.a.set_data_handle(const_cast<float*>(a.data()));
  e.b.set_data_handle(const_cast<float*>(b.data()));
  e.c.set_data_handle(c.data());
  e.prim.execute(stream(), {{DNNL_ARG_SRC, e.a},
                            {DNNL_ARG_WEIGHTS, e.b},
                            {DNNL_ARG_DST, e.c},
                            {DNNL_ARG_SCRATCHPAD, scratchpad(e.scratch_md)}});
  stream().wait();
}

}  // namespace tandem
