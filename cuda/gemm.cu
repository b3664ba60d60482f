// Row-major sgemm through column-major cuBLAS: C = A*B is computed as C^T = B^T * A^T.
#include "cuda/cuda_backend_impl.h"

namespace tandem {

// c (M,N) = alpha * op(a) * op(b) + beta * c, op(a) (M,K), op(b) (K,N); 2-D row-major tensors.
void CudaBackend::gemm(Tensor& c, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b,
                       float alpha, float beta) {
  TANDEM_CHECK(a.shape().rank() == 2 && b.shape().rank() == 2 && c.shape().rank() == 2,
               "gemm takes 2-D tensors");
  const int64_t m = c.dim(0), n = c.dim(1);
  const int64_t k = trans_a ? a.dim(0) : a.dim(1);
  TANDEM_CHECK((trans_a ? a.dim(1) : a.dim(0)) == m, "gemm: op(a) " + a.shape().str() + " rows");
  TANDEM_CHECK((trans_b ? b.dim(1) : b.dim(0)) == k && (trans_b ? b.dim(0) : b.dim(1)) == n,
               "gemm: op(b) " + b.shape().str() + " does not match");
  if (m == 0 || n == 0) return;
  // Row-major X (r,c) is column-major X^T with leading dimension c.
  const int lda = static_cast<int>(a.dim(1)), ldb = static_cast<int>(b.dim(1));
  const int ldc = static_cast<int>(n);
  if (k == 0) {  // c = beta * c, as the CPU: with beta 0, zeros (a scaling would keep NaN)
    if (beta == 0.f)
      CUDA_CHECK(cudaMemsetAsync(c.data(), 0, c.bytes(), stream_));
    else
      CUBLAS_CHECK(cublasSscal(cublas_, static_cast<int>(m * n), &beta, c.data(), 1));
    return;
  }
  if (tracing())
    placed("gemm " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
           " -> cuBLAS sgemm" + (options_.tf32 ? " (TF32 tensor-op math)" : " (FP32)"));
  CUBLAS_CHECK(cublasSgemm(cublas_, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                           trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n),
                           static_cast<int>(m), static_cast<int>(k), &alpha, b.data(), ldb,
                           a.data(), lda, &beta, c.data(), ldc));
}

}  // namespace tandem
