// Row-major gemm through column-major cuBLAS: C = A*B is computed as C^T = B^T * A^T.
//
// fp32: cublasSgemm. 16 bits (a, b or c bf16 or fp16): cublasGemmEx with A and B in that type,
// CUBLAS_COMPUTE_32F (fp32 accumulation, float alpha and beta) and C in its own type, fp32 or the
// 16-bit one (cuBLAS's table of GemmEx types has both for CUDA_R_16BF and CUDA_R_16F inputs). An
// fp32 operand (a dense layer's weights, the logits' gradient) is rounded to the 16-bit type in a
// stand-in first, as autocast casts it.
#include "cuda/cuda_backend_impl.h"

namespace tandem {
namespace {

cudaDataType_t cuda_type(DType d) {
  return d == DType::kBF16 ? CUDA_R_16BF : d == DType::kF16 ? CUDA_R_16F : CUDA_R_32F;
}

}  // namespace

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
    if (beta == 0.f) {
      CUDA_CHECK(cudaMemsetAsync(c.raw(), 0, c.bytes(), stream_));  // +0 in every dtype
    } else {  // on an fp32 stand-in of a 16-bit c (an fp32 c is its own)
      StandIn sc(*this, c, true, true);
      CUBLAS_CHECK(cublasSscal(cublas_, static_cast<int>(m * n), &beta, sc.get().data(), 1));
      sc.finish();
    }
    return;
  }
  const bool low = is_16bit(a.dtype()) || is_16bit(b.dtype()) || is_16bit(c.dtype());
  if (!low) {
    if (tracing())
      placed("gemm " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
             " -> cuBLAS sgemm" + (options_.tf32 ? " (TF32 tensor-op math)" : " (FP32)"));
    CUBLAS_CHECK(cublasSgemm(cublas_, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                             trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n),
                             static_cast<int>(m), static_cast<int>(k), &alpha, b.data(), ldb,
                             a.data(), lda, &beta, c.data(), ldc));
    return;
  }
  // The compute type: a's if 16-bit, else b's, else c's (a product of two fp32 operands into a
  // 16-bit c, the first dense layer's input gradient, rounds both).
  const DType ct = is_16bit(a.dtype()) ? a.dtype() : is_16bit(b.dtype()) ? b.dtype() : c.dtype();
  StandIn sa(*this, a, ct, Layout::kPlain, true, false),
      sb(*this, b, ct, Layout::kPlain, true, false);
  // C in its own dtype where GemmEx takes it with ct inputs (ct, or fp32); otherwise (a bf16
  // product into an fp16 c: no run makes one) an fp32 stand-in.
  const DType c_type = c.dtype() == ct ? ct : DType::kF32;
  StandIn sc(*this, c, c_type, Layout::kPlain, beta != 0.f, true);
  gemm16_ = ct;
  if (tracing())
    placed("gemm " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + " " +
           dtype_name(a.dtype()) + " * " + dtype_name(b.dtype()) + " -> " + dtype_name(c.dtype()) +
           ": cuBLAS GemmEx (" + (ct == DType::kBF16 ? "BF16" : "FP16") +
           " tensor-op math, CUBLAS_COMPUTE_32F" +
           (a.dtype() != ct || b.dtype() != ct ? ", fp32 operands rounded first" : "") + ")");
  CUBLAS_CHECK(cublasGemmEx(
      cublas_, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
      static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, sb.get().raw(),
      cuda_type(ct), ldb, sa.get().raw(), cuda_type(ct), lda, &beta, sc.get().raw(),
      cuda_type(c_type), ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  sc.finish();
}

}  // namespace tandem
