// Checks shared by the backends' implementations of the Backend interface.
#include "engine/backend.h"

#include "engine/error.h"

namespace tandem {

ColumnCopy check_copy_columns(const Tensor& dst, int64_t dst_col, const Tensor& src,
                              int64_t src_col, int64_t cols) {
  const auto what = [&] {
    return "copy_columns " + src.shape().str() + " [" + std::to_string(src_col) + ", +" +
           std::to_string(cols) + ") to " + dst.shape().str() + " [" + std::to_string(dst_col) +
           ", +" + std::to_string(cols) + ")";
  };
  TANDEM_CHECK(dst.shape().rank() >= 1 && src.shape().rank() >= 1 && dst.dim(0) == src.dim(0),
               what());
  const int64_t rows = dst.dim(0);
  const int64_t dst_row = rows ? dst.numel() / rows : 0, src_row = rows ? src.numel() / rows : 0;
  TANDEM_CHECK(cols >= 0 && dst_col >= 0 && src_col >= 0 && dst_col + cols <= dst_row &&
                   src_col + cols <= src_row,
               what());
  return {rows, dst_row, src_row};
}

MultiplyGeometry multiply_geometry(const Tensor& y, const Tensor& a, const Tensor& b) {
  const Shape &as = a.shape(), &bs = b.shape();
  const std::string what = "multiply " + as.str() + " * " + bs.str() + " -> " + y.shape().str();
  TANDEM_CHECK(y.numel() == a.numel(), what);
  if (bs == as) return {a.numel(), 1};
  // One value per sample: (N), or (N,1,...).
  if (as.rank() >= 2 && bs.rank() >= 1 && bs[0] == as[0] && b.numel() == as[0])
    return {as[0], as[0] ? a.numel() / as[0] : 1};
  // (N,C) or (N,C,1,1) against (N,C,...): one value per (sample, channel).
  TANDEM_CHECK(as.rank() >= 2 && bs.rank() >= 2 && bs[0] == as[0] && bs[1] == as[1] &&
                   b.numel() == as[0] * as[1],
               what);
  const int64_t rows = as[0] * as[1];
  return {rows, rows ? a.numel() / rows : 1};
}

GroupGeometry group_geometry(const Tensor& x, const Tensor& gamma, const Tensor& stat, int groups,
                             const char* what) {
  const std::string shapes = std::string(what) + ": " + x.shape().str() + " in " +
                             std::to_string(groups) + " groups, gamma " + gamma.shape().str() +
                             ", statistics " + stat.shape().str();
  TANDEM_CHECK(x.shape().rank() >= 2 && groups > 0 && x.dim(1) % groups == 0 &&
                   gamma.numel() == x.dim(1) && stat.numel() == x.dim(0) * groups,
               shapes);
  const int64_t n = x.dim(0), c = x.dim(1);
  return {n, c, groups, c / groups, n * c == 0 ? 0 : x.numel() / (n * c)};
}

int64_t batch_to_try(int64_t batch, size_t asked, size_t available) {
  if (batch <= 1) return 1;
  if (!available || asked <= available / 2) return batch / 2;
  const double fit = static_cast<double>(batch) * static_cast<double>(available) / 2.0 /
                     static_cast<double>(asked);
  int64_t n = 1;
  while (static_cast<double>(n) * 2 <= fit && n * 2 <= batch / 2) n *= 2;
  return n;
}

// The fusions by default: the op, then the relu (in place forward; through a buffer backward).
void Backend::batchnorm_relu_forward_training(Tensor& y, Tensor& save_mean, Tensor& save_inv_std,
                                              Tensor& running_mean, Tensor& running_var,
                                              const Tensor& x, const Tensor& gamma,
                                              const Tensor& beta, float momentum, float eps) {
  batchnorm_forward_training(y, save_mean, save_inv_std, running_mean, running_var, x, gamma, beta,
                             momentum, eps);
  activation_forward(y, y, Activation::kRelu, 0.f);
}

void Backend::batchnorm_relu_forward_inference(Tensor& y, const Tensor& x, const Tensor& gamma,
                                               const Tensor& beta, const Tensor& running_mean,
                                               const Tensor& running_var, float eps) {
  batchnorm_forward_inference(y, x, gamma, beta, running_mean, running_var, eps);
  activation_forward(y, y, Activation::kRelu, 0.f);
}

// relu's gradient from its output: y <= 0 exactly where its input was.
void Backend::batchnorm_relu_backward(Tensor* dx, Tensor& dgamma, Tensor& dbeta, const Tensor& dy,
                                      const Tensor& y, const Tensor& x, const Tensor& gamma,
                                      const Tensor& save_mean, const Tensor& save_inv_std) {
  Tensor d(*this, dy.shape(), dy.dtype(), dy.layout());
  activation_backward(d, dy, y, y, Activation::kRelu, 0.f);
  batchnorm_backward(dx, dgamma, dbeta, d, x, gamma, save_mean, save_inv_std);
}

void Backend::add_relu(Tensor& y, const Tensor& a, const Tensor& b) {
  add(y, a, b);
  activation_forward(y, y, Activation::kRelu, 0.f);
}

void Backend::relu_max_pool_forward(Tensor& y, const Tensor& x, const Pool2dParams& p) {
  pool2d_forward(y, x, p);
  activation_forward(y, y, Activation::kRelu, 0.f);
}

// Where the window's maximum is not above 0, relu's gradient is 0 and nothing is routed; else y
// is that maximum, as pool2d_backward expects.
void Backend::relu_max_pool_backward(Tensor& dx, const Tensor& dy, const Tensor& x, const Tensor& y,
                                     const Pool2dParams& p) {
  Tensor d(*this, dy.shape(), dy.dtype(), dy.layout());
  activation_backward(d, dy, y, y, Activation::kRelu, 0.f);
  pool2d_backward(dx, d, x, y, p);
}

void Backend::add_relu_backward(const std::vector<Tensor*>& dxs, const Tensor& dy,
                                const Tensor& y) {
  const Tensor* first = nullptr;
  for (Tensor* dx : dxs) {
    if (!dx) continue;
    if (first) {
      copy(*dx, *first);
    } else {
      activation_backward(*dx, dy, y, y, Activation::kRelu, 0.f);
      first = dx;
    }
  }
}

}  // namespace tandem
