// Optimizer updates and dropout of every backend: hand-computed steps, reference, mask statistics.
#include <cmath>
#include <string>
#include <vector>

#include "tests/cpu/backend_test_util.h"
#include "tests/reference/reference.h"

namespace tandem::testing {
namespace {

class OptimizerTest : public BackendTest {
 protected:
  // Two SGD steps of one weight w=1 with a constant gradient 0.5; returns w after each step.
  std::vector<float> two_sgd_steps(const SgdParams& p) {
    Tensor w = upload({1}, {1.f}), v = upload({1}, {0.f}), g = upload({1}, {0.5f});
    std::vector<float> out;
    for (int i = 0; i < 2; ++i) {
      be().sgd_update(w, v, g, p);
      out.push_back(download(w)[0]);
    }
    return out;
  }
  std::vector<float> two_adam_steps(AdamParams p) {
    Tensor w = upload({1}, {1.f}), m = upload({1}, {0.f}), v = upload({1}, {0.f});
    Tensor g = upload({1}, {0.5f});
    std::vector<float> out;
    for (p.step = 1; p.step <= 2; ++p.step) {
      be().adam_update(w, m, v, g, p);
      out.push_back(download(w)[0]);
    }
    return out;
  }
};

// lr 0.1, momentum 0.9: v1 = 0.5, w1 = 0.95; v2 = 0.95, w2 = 0.855.
TEST_P(OptimizerTest, SgdMomentumTwoSteps) {
  SgdParams p;
  p.lr = 0.1f, p.momentum = 0.9f;
  std::vector<float> w = two_sgd_steps(p);
  EXPECT_NEAR(w[0], 0.95f, 1e-6);
  EXPECT_NEAR(w[1], 0.855f, 1e-6);
}

// Nesterov: step1 = 0.5 + 0.9*0.5 -> w1 = 0.905; step2 = 0.5 + 0.9*0.95 -> w2 = 0.7695.
TEST_P(OptimizerTest, SgdNesterovTwoSteps) {
  SgdParams p;
  p.lr = 0.1f, p.momentum = 0.9f, p.nesterov = true;
  std::vector<float> w = two_sgd_steps(p);
  EXPECT_NEAR(w[0], 0.905f, 1e-6);
  EXPECT_NEAR(w[1], 0.7695f, 1e-6);
}

// Weight decay 0.1: g1 = 0.6, w1 = 0.94; g2 = 0.594, v2 = 1.134, w2 = 0.8266.
TEST_P(OptimizerTest, SgdWeightDecayTwoSteps) {
  SgdParams p;
  p.lr = 0.1f, p.momentum = 0.9f, p.weight_decay = 0.1f;
  std::vector<float> w = two_sgd_steps(p);
  EXPECT_NEAR(w[0], 0.94f, 1e-6);
  EXPECT_NEAR(w[1], 0.8266f, 1e-6);
}

// Without momentum the velocity is not needed: plain w -= lr * g.
TEST_P(OptimizerTest, SgdWithoutMomentumIgnoresVelocity) {
  Tensor w = upload({2}, {1.f, 2.f}), g = upload({2}, {0.5f, -1.f}), none;
  SgdParams p;
  p.lr = 0.1f;
  be().sgd_update(w, none, g, p);
  Floats got = download(w);
  EXPECT_NEAR(got[0], 0.95f, 1e-6);
  EXPECT_NEAR(got[1], 2.1f, 1e-6);
}

// A constant gradient makes each bias-corrected Adam step lr (less eps): w = 0.9, 0.8.
TEST_P(OptimizerTest, AdamTwoSteps) {
  AdamParams p;
  p.lr = 0.1f;
  std::vector<float> w = two_adam_steps(p);
  EXPECT_NEAR(w[0], 0.9f, 1e-6);
  EXPECT_NEAR(w[1], 0.8f, 1e-6);
}

// Coupled decay 0.1 (PyTorch Adam weight_decay): g1 = 0.6, g2 = 0.59 -> w2 = 0.8000473.
TEST_P(OptimizerTest, AdamWeightDecayTwoSteps) {
  AdamParams p;
  p.lr = 0.1f, p.weight_decay = 0.1f;
  std::vector<float> w = two_adam_steps(p);
  EXPECT_NEAR(w[0], 0.9f, 1e-6);
  EXPECT_NEAR(w[1], 0.8000473f, 1e-6);
}

// AdamW: w *= 1 - lr*wd before the step: w1 = 0.99 - 0.1 = 0.89, w2 = 0.8811 - 0.1 = 0.7811.
TEST_P(OptimizerTest, AdamWTwoSteps) {
  AdamParams p;
  p.lr = 0.1f, p.weight_decay = 0.1f, p.decoupled = true;
  std::vector<float> w = two_adam_steps(p);
  EXPECT_NEAR(w[0], 0.89f, 1e-6);
  EXPECT_NEAR(w[1], 0.7811f, 1e-6);
}

TEST_P(OptimizerTest, SgdAndAdamMatchReferenceOnRandomTensors) {
  const int64_t n = 70001;  // big enough for the parallel path
  Floats w0 = random(n, 1), g0 = random(n, 2), g1 = random(n, 3);
  for (bool nesterov : {false, true}) {
    SgdParams p;
    p.lr = 0.05f, p.momentum = 0.9f, p.weight_decay = 1e-3f, p.nesterov = nesterov;
    Tensor w = upload({n}, w0), v = upload({n}, Floats(n, 0.f));
    Doubles rw(w0.begin(), w0.end()), rv(n, 0.0);
    for (const Floats* g : {&g0, &g1}) {
      Tensor tg = upload({n}, *g);
      be().sgd_update(w, v, tg, p);
      reference::sgd_update(rw, rv, Doubles(g->begin(), g->end()), p);
    }
    EXPECT_CLOSE(download(w), rw);
    EXPECT_CLOSE(download(v), rv);
  }
  for (bool decoupled : {false, true}) {
    AdamParams p;
    p.lr = 0.01f, p.weight_decay = 0.01f, p.decoupled = decoupled;
    Tensor w = upload({n}, w0), m = upload({n}, Floats(n, 0.f)), v = upload({n}, Floats(n, 0.f));
    Doubles rw(w0.begin(), w0.end()), rm(n, 0.0), rv(n, 0.0);
    p.step = 1;
    for (const Floats* g : {&g0, &g1}) {
      Tensor tg = upload({n}, *g);
      be().adam_update(w, m, v, tg, p);
      reference::adam_update(rw, rm, rv, Doubles(g->begin(), g->end()), p);
      ++p.step;
    }
    EXPECT_CLOSE(download(w), rw);
    EXPECT_CLOSE(download(m), rm);
  }
}

TANDEM_INSTANTIATE_BACKEND_SUITE(OptimizerTest);

class DropoutTest : public BackendTest {};

TEST_P(DropoutTest, MaskIsThePhiloxMaskOfTheInterface) {
  const int64_t n = 1001;
  const float p = 0.3f;
  Floats x = random(n, 1);
  Tensor tx = upload({7, 11, 13}, x), y = output({7, 11, 13}), mask = output({7, 11, 13});
  be().dropout_forward(y, mask, tx, p, 42, 7);
  Doubles ref = reference::dropout_mask(n, p, 42, 7);
  Floats m = download(mask), got = download(y);
  EXPECT_CLOSE(m, ref);
  Doubles ref_y(n);
  for (int64_t i = 0; i < n; ++i) ref_y[i] = x[i] * ref[i];
  EXPECT_CLOSE(got, ref_y);

  Floats dy = random(n, 2);
  Tensor tdy = upload({7, 11, 13}, dy), dx = output({7, 11, 13});
  be().dropout_backward(dx, tdy, mask);
  Doubles ref_dx(n);
  for (int64_t i = 0; i < n; ++i) ref_dx[i] = dy[i] * ref[i];
  EXPECT_CLOSE(download(dx), ref_dx);
}

TEST_P(DropoutTest, SameSeedAndOffsetGiveTheSameMask) {
  const int64_t n = 4099;
  Tensor x = upload({n}, Floats(n, 1.f));
  Tensor y = output({n}), m1 = output({n}), m2 = output({n}), m3 = output({n});
  be().dropout_forward(y, m1, x, 0.5f, 123, 9);
  be().dropout_forward(y, m2, x, 0.5f, 123, 9);
  be().dropout_forward(y, m3, x, 0.5f, 123, 10);
  EXPECT_EQ(download(m1), download(m2));
  EXPECT_NE(download(m1), download(m3));
}

TEST_P(DropoutTest, DroppedFractionIsNearP) {
  const int64_t n = 200000;
  Tensor x = upload({n}, Floats(n, 1.f)), y = output({n}), m = output({n});
  for (float p : {0.1f, 0.5f, 0.8f}) {
    be().dropout_forward(y, m, x, p, 5, 0);
    Floats mask = download(m);
    int64_t dropped = 0;
    double kept_sum = 0;
    for (float v : mask) {
      dropped += v == 0.f;
      kept_sum += v;
    }
    EXPECT_NEAR(static_cast<double>(dropped) / n, p, 0.01) << "p " << p;
    EXPECT_NEAR(kept_sum / n, 1.0, 0.02) << "p " << p;  // inverted dropout keeps the mean
  }
}

TANDEM_INSTANTIATE_BACKEND_SUITE(DropoutTest);

}  // namespace
}  // namespace tandem::testing
