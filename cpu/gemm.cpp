// Matrix multiply c = alpha * op(a) * op(b) + beta * c on the CPU through oneDNN's sgemm.
//
// dnnl_sgemm (row-major, its jit AVX-512 kernel) measured as fast as the matmul primitive
// (brg:avx512_core) for the dense-layer shapes of LeNet, the MLP and cifar_cnn, within 5% either
// way, and needs no cached state beyond a placement line per shape.
#include <string>

#include "cpu/cpu_backend_impl.h"

namespace tandem {
namespace {

struct GemmEntry : CpuCacheEntry {};

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
  const std::string key =
      a.shape().str() + (trans_a ? "^T" : "") + "x" + b.shape().str() + (trans_b ? "^T" : "");
  cached<GemmEntry>("gemm " + key, [&] {
    auto e = std::make_unique<GemmEntry>();
    e->placement = "gemm " + key + " -> dnnl_sgemm (jit)";
    return e;
  });
  dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, a.data(),
                                a.dim(1), b.data(), b.dim(1), beta, c.data(), N);
  TANDEM_CHECK(st == dnnl_success, "dnnl_sgemm failed with status " + std::to_string(st));
}

}  // namespace tandem
