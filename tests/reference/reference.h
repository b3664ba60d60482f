// Naive double-precision reference implementations of every Backend op, in plain loops.
//
// The specification the backends are tested against: written for clarity, not speed. Inputs are
// fp32 host vectors (what a test uploads), outputs double. Layouts are those of engine/backend.h.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/backend.h"

namespace tandem::reference {

using Floats = std::vector<float>;
using Doubles = std::vector<double>;
using Labels = std::vector<int32_t>;

// The sizes of one convolution: x (N,C,H,W), w (K,C,R,S), y (N,K,P,Q).
struct ConvShape {
  int64_t n, c, h, w, k, r, s;
  int64_t p(const Conv2dParams& q) const {
    return conv_out_size(h, static_cast<int>(r), q.stride_h, q.pad_h, q.dilation_h);
  }
  int64_t q(const Conv2dParams& q) const {
    return conv_out_size(w, static_cast<int>(s), q.stride_w, q.pad_w, q.dilation_w);
  }
};

// c (M,N) = alpha * op(a) * op(b) + beta * c; a is (M,K), or (K,M) when trans_a; likewise b.
Doubles gemm(const Floats& c, const Floats& a, const Floats& b, int64_t m, int64_t n, int64_t k,
             bool trans_a, bool trans_b, double alpha, double beta);

// y (N,K,P,Q); b (K) may be empty.
Doubles conv2d_forward(const Floats& x, const Floats& w, const Floats& b, const ConvShape& s,
                       const Conv2dParams& p);
// dx (N,C,H,W) from dy (N,K,P,Q).
Doubles conv2d_backward_data(const Floats& dy, const Floats& w, const ConvShape& s,
                             const Conv2dParams& p);
// dw (K,C,R,S) from dy (N,K,P,Q) and x.
Doubles conv2d_backward_filter(const Floats& dy, const Floats& x, const ConvShape& s,
                               const Conv2dParams& p);

// x (N,C,H,W) -> y (N,C,P,Q).
Doubles pool2d_forward(const Floats& x, int64_t n, int64_t c, int64_t h, int64_t w,
                       const Pool2dParams& p);
// dx (N,C,H,W): max routes to the first maximum of each window, average excludes padding.
Doubles pool2d_backward(const Floats& dy, const Floats& x, int64_t n, int64_t c, int64_t h,
                        int64_t w, const Pool2dParams& p);

Doubles activation_forward(const Floats& x, Activation a, double alpha);
// dx from dy and the forward input x (the output is recomputed in double).
Doubles activation_backward(const Floats& dy, const Floats& x, Activation a, double alpha);

// y (N,C,inner) + b (C).
// y = a * b[i / inner] (inner 1: b has a's shape); and its gradients, db summed over each row.
Doubles multiply(const Floats& a, const Floats& b, int64_t inner);
Doubles multiply_backward_b(const Floats& dy, const Floats& a, int64_t inner);

Doubles bias_add(const Floats& y, const Floats& b, int64_t n, int64_t c, int64_t inner);
// db (C) = sum of dy (N,C,inner) over N and inner.
Doubles bias_backward(const Floats& dy, int64_t n, int64_t c, int64_t inner);
Doubles add(const Floats& a, const Floats& b);

// Batch normalization of x (N,C,inner) with the batch's statistics: y, and per channel the mean
// and the biased variance.
struct BatchNorm {
  Doubles y, mean, var;
};
BatchNorm batchnorm_training(const Floats& x, const Floats& gamma, const Floats& beta, int64_t n,
                             int64_t c, int64_t inner, double eps);
// With given statistics (the running ones in eval).
Doubles batchnorm_inference(const Floats& x, const Floats& gamma, const Floats& beta,
                            const Floats& mean, const Floats& var, int64_t n, int64_t c,
                            int64_t inner, double eps);

// Group normalization of x (n, c, inner) in `groups` groups: per sample and group, the biased
// variance; y = gamma[c] (x - mean) / sqrt(var + eps) + beta[c].
Doubles groupnorm(const Floats& x, const Floats& gamma, const Floats& beta, int64_t n, int64_t c,
                  int64_t inner, int64_t groups, double eps);

// Softmax probabilities (N,C) and the mean cross-entropy against the target
// (1 - smoothing) onehot + smoothing / C, as -sum_j target_j log p_j.
Doubles softmax(const Floats& logits, int64_t n, int64_t c);
double softmax_cross_entropy(const Floats& logits, const Labels& labels, int64_t n, int64_t c,
                             double smoothing = 0);
// (probs - target) / N.
Doubles softmax_cross_entropy_backward(const Floats& probs, const Labels& labels, int64_t n,
                                       int64_t c, double smoothing = 0);
double mse(const Floats& pred, const Labels& labels, int64_t n, int64_t c);
Doubles mse_backward(const Floats& pred, const Labels& labels, int64_t n, int64_t c);
// Rows whose first maximum is at the label.
int64_t accuracy(const Floats& scores, const Labels& labels, int64_t n, int64_t c);

// The dropout mask of backend.h: (philox_uniform(seed, offset, i) >= p) / (1 - p).
Doubles dropout_mask(int64_t numel, double p, uint64_t seed, uint64_t offset);

// One optimizer step in place, PyTorch semantics (see backend.h).
void sgd_update(Doubles& w, Doubles& velocity, const Doubles& grad, const SgdParams& p);
void adam_update(Doubles& w, Doubles& m, Doubles& v, const Doubles& grad, const AdamParams& p);

}  // namespace tandem::reference
