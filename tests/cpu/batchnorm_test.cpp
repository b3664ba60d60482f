// Batch normalization ops of every backend against the reference: the training forward (output,
// saved statistics, running averages), the inference forward and the parameter gradients. The
// input gradient is checked against finite differences in tests/layers/gradient_test.cpp.
#include <cmath>
#include <vector>

#include "tests/cpu/backend_test_util.h"
#include "tests/reference/reference.h"

namespace tandem::testing {
namespace {

// The shapes: a conv layer's (N,C,H,W), a plane that does not divide a GPU block, one large enough
// that the GPU splits each channel's sum over several blocks, and a dense layer's (N,C).
const std::vector<Shape>& shapes() {
  static const std::vector<Shape> s = {Shape{4, 3, 5, 6}, Shape{2, 17, 3, 5},
                                       Shape{64, 20, 24, 24}, Shape{64, 7}};
  return s;
}

struct Geometry {
  int64_t n, c, inner, m;
};
Geometry geometry(const Shape& s) {
  const int64_t inner = s.numel() / (s[0] * s[1]);
  return {s[0], s[1], inner, s[0] * inner};
}

class BatchNormTest : public BackendTest {};

TEST_P(BatchNormTest, TrainingNormalizesEachChannelAndMovesTheRunningAverages) {
  const float momentum = 0.1f, eps = 1e-5f;
  uint32_t seed = 1;
  for (const Shape& s : shapes()) {
    SCOPED_TRACE(s.str());
    const Geometry g = geometry(s);
    // Values around 3, not 0: the variance must not come from E[x^2] - E[x]^2.
    const Floats x = random(s.numel(), seed++, 2.f, 4.f);
    const Floats gamma = random(g.c, seed++, 0.5f, 1.5f), beta = random(g.c, seed++);
    const Floats rm = random(g.c, seed++), rv = random(g.c, seed++, 0.5f, 2.f);
    Tensor tx = upload(s, x), ty = output(s), mean = output({g.c}), inv_std = output({g.c});
    Tensor trm = upload({g.c}, rm), trv = upload({g.c}, rv);
    be().batchnorm_forward_training(ty, mean, inv_std, trm, trv, tx, upload({g.c}, gamma),
                                    upload({g.c}, beta), momentum, eps);
    const reference::BatchNorm want =
        reference::batchnorm_training(x, gamma, beta, g.n, g.c, g.inner, eps);
    EXPECT_CLOSE(download(ty), want.y);
    EXPECT_CLOSE(download(mean), want.mean);
    Doubles want_inv_std(g.c), want_rm(g.c), want_rv(g.c);
    for (int64_t c = 0; c < g.c; ++c) {
      want_inv_std[c] = 1.0 / std::sqrt(want.var[c] + eps);
      want_rm[c] = (1 - momentum) * rm[c] + momentum * want.mean[c];
      // The running variance is the unbiased one, as PyTorch keeps it.
      const double unbiased = want.var[c] * static_cast<double>(g.m) / static_cast<double>(g.m - 1);
      want_rv[c] = (1 - momentum) * rv[c] + momentum * unbiased;
    }
    EXPECT_CLOSE(download(inv_std), want_inv_std);
    EXPECT_CLOSE(download(trm), want_rm);
    EXPECT_CLOSE(download(trv), want_rv);
  }
}

TEST_P(BatchNormTest, InferenceUsesTheGivenStatistics) {
  uint32_t seed = 30;
  for (const Shape& s : shapes()) {
    SCOPED_TRACE(s.str());
    const Geometry g = geometry(s);
    const Floats x = random(s.numel(), seed++), gamma = random(g.c, seed++), beta = random(g.c, seed++);
    const Floats rm = random(g.c, seed++), rv = random(g.c, seed++, 0.5f, 2.f);
    Tensor ty = output(s);
    be().batchnorm_forward_inference(ty, upload(s, x), upload({g.c}, gamma), upload({g.c}, beta),
                                     upload({g.c}, rm), upload({g.c}, rv), 1e-3f);
    EXPECT_CLOSE(download(ty), reference::batchnorm_inference(x, gamma, beta, rm, rv, g.n, g.c,
                                                              g.inner, 1e-3));
  }
}

TEST_P(BatchNormTest, BackwardGivesTheScaleAndShiftGradients) {
  uint32_t seed = 60;
  for (const Shape& s : shapes()) {
    SCOPED_TRACE(s.str());
    const Geometry g = geometry(s);
    const Floats x = random(s.numel(), seed++), dy = random(s.numel(), seed++);
    const Floats gamma = random(g.c, seed++, 0.5f, 1.5f), beta(static_cast<size_t>(g.c), 0.f);
    Tensor tx = upload(s, x), tgamma = upload({g.c}, gamma), ty = output(s);
    Tensor mean = output({g.c}), inv_std = output({g.c});
    Tensor rm = upload({g.c}, Floats(static_cast<size_t>(g.c), 0.f));
    Tensor rv = upload({g.c}, Floats(static_cast<size_t>(g.c), 1.f));
    be().batchnorm_forward_training(ty, mean, inv_std, rm, rv, tx, tgamma, upload({g.c}, beta),
                                    0.1f, 1e-5f);
    Tensor dgamma = output({g.c}), dbeta = output({g.c}), dx = output(s);
    be().batchnorm_backward(&dx, dgamma, dbeta, upload(s, dy), tx, tgamma, mean, inv_std);
    // dbeta = sum(dy); dgamma = sum(dy * xhat), xhat the output with gamma 1 and beta 0.
    const reference::BatchNorm bn = reference::batchnorm_training(
        x, Floats(static_cast<size_t>(g.c), 1.f), beta, g.n, g.c, g.inner, 1e-5);
    Doubles want_dgamma(g.c, 0.0);
    for (int64_t i = 0; i < s.numel(); ++i) want_dgamma[(i / g.inner) % g.c] += dy[i] * bn.y[i];
    EXPECT_CLOSE(download(dgamma), want_dgamma);
    EXPECT_CLOSE(download(dbeta), reference::bias_backward(dy, g.n, g.c, g.inner));
    // Without an input gradient the parameter gradients are the same.
    Tensor dgamma2 = output({g.c}), dbeta2 = output({g.c});
    be().batchnorm_backward(nullptr, dgamma2, dbeta2, upload(s, dy), tx, tgamma, mean, inv_std);
    EXPECT_EQ(download(dgamma2), download(dgamma));
    EXPECT_EQ(download(dbeta2), download(dbeta));
  }
}

TEST_P(BatchNormTest, OneValuePerChannelIsRefusedWhileTraining) {
  Tensor x = upload({1, 4}, {1, 2, 3, 4}), y = output({1, 4});
  Tensor c1 = upload({4}, Floats(4, 1.f)), c2 = upload({4}, Floats(4, 0.f));
  Tensor mean = output({4}), inv_std = output({4});
  EXPECT_THROW(be().batchnorm_forward_training(y, mean, inv_std, c2, c1, x, c1, c2, 0.1f, 1e-5f),
               Error);
}

TANDEM_INSTANTIATE_BACKEND_SUITE(BatchNormTest);

}  // namespace
}  // namespace tandem::testing
