// Optimizer steps and learning-rate schedules against values computed by hand.
#include <gtest/gtest.h>

#include "engine/backend_registry.h"
#include "engine/layer.h"
#include "engine/optimizer.h"

namespace tandem {
namespace {

struct OneParam {
  std::unique_ptr<Backend> backend = create_backend("cpu", {});
  Param p;
  OneParam(std::vector<float> w) {
    p.shape = Shape{static_cast<int64_t>(w.size())};
    p.value = Tensor(*backend, p.shape);
    p.grad = Tensor(*backend, p.shape);
    backend->upload(p.value, w.data());
  }
  void set_grad(std::vector<float> g) { backend->upload(p.grad, g.data()); }
  std::vector<float> w() {
    std::vector<float> v(static_cast<size_t>(p.shape.numel()));
    backend->download(v.data(), p.value);
    return v;
  }
};

TEST(Optimizer, SgdMomentumWithWeightDecayTwoSteps) {
  OneParam t({1.0f, -2.0f});
  OptimizerConfig c;
  c.type = "sgd";
  c.momentum = 0.9;
  c.weight_decay = 0.1;
  Optimizer opt(c, {&t.p}, *t.backend);
  t.set_grad({0.5f, 0.25f});
  opt.step(0.1);
  // g = 0.5 + 0.1*1 = 0.6; v = 0.6; w = 1 - 0.06 = 0.94
  // g = 0.25 + 0.1*-2 = 0.05; v = 0.05; w = -2 - 0.005 = -2.005
  EXPECT_NEAR(t.w()[0], 0.94f, 1e-6);
  EXPECT_NEAR(t.w()[1], -2.005f, 1e-6);
  opt.step(0.1);
  // g = 0.5 + 0.094 = 0.594; v = 0.9*0.6 + 0.594 = 1.134; w = 0.94 - 0.1134 = 0.8266
  // g = 0.25 - 0.2005 = 0.0495; v = 0.045 + 0.0495 = 0.0945; w = -2.005 - 0.00945 = -2.01445
  EXPECT_NEAR(t.w()[0], 0.8266f, 1e-6);
  EXPECT_NEAR(t.w()[1], -2.01445f, 1e-6);
}

TEST(Optimizer, SgdNesterovUsesTheLookAheadGradient) {
  OneParam t({1.0f});
  OptimizerConfig c;
  c.momentum = 0.5;
  c.nesterov = true;
  Optimizer opt(c, {&t.p}, *t.backend);
  t.set_grad({1.0f});
  opt.step(0.1);  // v = 1; step = g + 0.5 v = 1.5; w = 0.85
  EXPECT_NEAR(t.w()[0], 0.85f, 1e-6);
  opt.step(0.1);  // v = 0.5 + 1 = 1.5; step = 1 + 0.75 = 1.75; w = 0.675
  EXPECT_NEAR(t.w()[0], 0.675f, 1e-6);
}

TEST(Optimizer, AdamFirstStepMovesByTheLearningRate) {
  OneParam t({1.0f, 1.0f});
  OptimizerConfig c;
  c.type = "adam";
  Optimizer opt(c, {&t.p}, *t.backend);
  t.set_grad({0.3f, -4.0f});
  opt.step(0.01);
  // Bias-corrected m/sqrt(v) = g/|g| on the first step: w -= lr * sign(g) (eps negligible).
  EXPECT_NEAR(t.w()[0], 0.99f, 1e-6);
  EXPECT_NEAR(t.w()[1], 1.01f, 1e-6);
  EXPECT_EQ(opt.steps(), 1);
}

TEST(Optimizer, AdamWDecaysTheWeightsDirectly) {
  OneParam t({2.0f});
  OptimizerConfig c;
  c.type = "adamw";
  c.weight_decay = 0.5;
  Optimizer opt(c, {&t.p}, *t.backend);
  t.set_grad({1.0f});
  opt.step(0.1);
  // w = 2 * (1 - 0.1*0.5) - 0.1 * 1 = 1.9 - 0.1 = 1.8
  EXPECT_NEAR(t.w()[0], 1.8f, 1e-6);
}

// Params packed into one buffer (as Graph::allocate lays them out) are updated like the same
// params apart, and the gap between them stays zero.
TEST(Optimizer, PackedParamsUpdateLikeSeparateOnesForEveryOptimizer) {
  auto backend = create_backend("cpu", {});
  const std::vector<Shape> shapes = {Shape{3, 5}, Shape{7}, Shape{2, 2}};
  for (const char* type : {"sgd", "adam", "adamw"}) {
    OptimizerConfig c;
    c.type = type;
    c.momentum = 0.9;
    c.nesterov = true;
    c.weight_decay = 0.01;
    int64_t packed = 0;
    for (const Shape& s : shapes) packed += packed_numel(s);
    Tensor values(*backend, Shape{packed}), grads(*backend, Shape{packed});
    backend->fill(values, 0.f);
    backend->fill(grads, 0.f);
    std::vector<Param> together(shapes.size()), apart(shapes.size());
    int64_t offset = 0;
    for (size_t i = 0; i < shapes.size(); ++i) {
      const int64_t n = shapes[i].numel();
      std::vector<float> w(n), g(n);
      for (int64_t j = 0; j < n; ++j) {
        w[j] = 0.1f * static_cast<float>(j + 1) - static_cast<float>(i);
        g[j] = 0.05f * static_cast<float>(j % 3) - 0.02f;
      }
      together[i].shape = apart[i].shape = shapes[i];
      together[i].value = values.view(offset, shapes[i]);
      together[i].grad = grads.view(offset, shapes[i]);
      offset += packed_numel(shapes[i]);
      apart[i].value = Tensor(*backend, shapes[i]);
      apart[i].grad = Tensor(*backend, shapes[i]);
      for (Param* p : {&together[i], &apart[i]}) {
        backend->upload(p->value, w.data());
        backend->upload(p->grad, g.data());
      }
    }
    std::vector<Param*> a, b;
    for (size_t i = 0; i < shapes.size(); ++i) a.push_back(&together[i]), b.push_back(&apart[i]);
    Optimizer packed_opt(c, a, *backend), apart_opt(c, b, *backend);
    for (int step = 0; step < 3; ++step) packed_opt.step(0.1), apart_opt.step(0.1);
    for (size_t i = 0; i < shapes.size(); ++i) {
      std::vector<float> x(shapes[i].numel()), y(shapes[i].numel());
      backend->download(x.data(), together[i].value);
      backend->download(y.data(), apart[i].value);
      EXPECT_EQ(x, y) << type << " param " << i;
    }
    std::vector<float> all(packed);
    backend->download(all.data(), values);
    EXPECT_EQ(all[15], 0.f) << type << ": the gap after the first param";
  }
}

TEST(Schedule, ConstantKeepsTheRate) {
  OptimizerConfig o;
  o.lr = 0.1;
  ScheduleConfig s;
  EXPECT_DOUBLE_EQ(learning_rate(o, s, 10, 7, 3, 100), 0.1);
}

TEST(Schedule, StepDecaysEveryStepEpochs) {
  OptimizerConfig o;
  o.lr = 0.1;
  ScheduleConfig s;
  s.type = "step";
  s.step = 3;
  s.gamma = 0.1;
  EXPECT_DOUBLE_EQ(learning_rate(o, s, 10, 2, 0, 10), 0.1);
  EXPECT_NEAR(learning_rate(o, s, 10, 3, 0, 10), 0.01, 1e-15);
  EXPECT_NEAR(learning_rate(o, s, 10, 6, 5, 10), 0.001, 1e-15);
}

TEST(Schedule, MultistepDecaysAtEachMilestone) {
  OptimizerConfig o;
  o.lr = 1.0;
  ScheduleConfig s;
  s.type = "multistep";
  s.milestones = {2, 5};
  s.gamma = 0.5;
  EXPECT_DOUBLE_EQ(learning_rate(o, s, 8, 1, 0, 10), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate(o, s, 8, 2, 0, 10), 0.5);
  EXPECT_DOUBLE_EQ(learning_rate(o, s, 8, 5, 0, 10), 0.25);
}

TEST(Schedule, CosineGoesFromTheRateToTheMinimum) {
  OptimizerConfig o;
  o.lr = 1.0;
  ScheduleConfig s;
  s.type = "cosine";
  s.min_lr = 0.1;
  EXPECT_DOUBLE_EQ(learning_rate(o, s, 4, 0, 0, 10), 1.0);
  EXPECT_NEAR(learning_rate(o, s, 4, 2, 0, 10), 0.55, 1e-12);  // halfway: the mean
}

TEST(Schedule, WarmupRisesLinearlyPerStep) {
  OptimizerConfig o;
  o.lr = 0.2;
  ScheduleConfig s;
  s.warmup_epochs = 1;
  EXPECT_NEAR(learning_rate(o, s, 5, 0, 0, 4), 0.05, 1e-12);
  EXPECT_NEAR(learning_rate(o, s, 5, 0, 3, 4), 0.2, 1e-12);
  EXPECT_NEAR(learning_rate(o, s, 5, 1, 0, 4), 0.2, 1e-12);
}

}  // namespace
}  // namespace tandem
