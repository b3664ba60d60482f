// Every layer's backward (input and parameter gradients) against central finite differences of
// the layer's forward computed in double precision by the reference (tests/reference).
//
// The objective is L = sum(y * r) for a fixed random r, so dL/dy = r. The finite difference
// (L(v+h) - L(v-h)) / (v+h - (v-h)) is taken at exactly representable fp32 points and evaluated
// in double, so its only error is the O(h^2) truncation; the analytic gradient comes from the
// layer's backward on the backend, in fp32. Inputs are kept away from the kinks of relu and max
// pooling (Caffe's kink problem) so that h never straddles one.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>

#include "engine/layer_registry.h"
#include "tests/cpu/backend_test_util.h"
#include "tests/reference/reference.h"

namespace tandem {
namespace {

using testing::Doubles;
using testing::Floats;
namespace ref = tandem::reference;

// The layer's forward in double: x and the parameters' values -> y.
using RefForward = std::function<Doubles(const Floats& x, const std::vector<Floats>& params)>;

struct Case {
  std::string name;
  std::string yaml;  // "conv2d: {filters: 3, kernel: 3}"
  Shape input;       // with the batch axis
  RefForward forward;
  bool kink_free_input = false;  // spread the input on a grid away from ties and zero
};

std::unique_ptr<Layer> build(const std::string& yaml, const Shape& sample) {
  YAML::Node node = YAML::Load("[" + yaml + "]")[0];
  LayerSpec spec;
  spec.where = "test";
  if (node.IsScalar()) {
    spec.type = node.Scalar();
    spec.args = ConfigMap(YAML::Node(YAML::NodeType::Null), "test", spec.type);
  } else {
    spec.type = node.begin()->first.Scalar();
    spec.args = ConfigMap(node.begin()->second, "test", spec.type);
  }
  auto layer = make_layer(spec);
  layer->set_name(spec.type);
  layer->choose_init("");
  layer->setup(sample);
  return layer;
}

double objective(const Doubles& y, const Floats& r) {
  double s = 0;
  for (size_t i = 0; i < y.size(); ++i) s += y[i] * r[i];
  return s;
}

// Central difference of L with respect to v[i], in double, at representable points.
double finite_difference(Floats& v, size_t i, const std::function<double()>& loss) {
  const float h = 1e-3f * std::max(1.f, std::abs(v[i]));
  const float orig = v[i];
  v[i] = orig + h;
  const float up = v[i];
  const double lp = loss();
  v[i] = orig - h;
  const float down = v[i];
  const double lm = loss();
  v[i] = orig;
  return (lp - lm) / (static_cast<double>(up) - static_cast<double>(down));
}

// The bound on max |analytic - fd| / max |fd|. Its two sources, for these layers' sizes:
// - the analytic gradient is an fp32 sum of at most L ~ 200 terms (a convolution's weight
//   gradient, batch normalization's input gradient), each addition off by at most 2^-24 of the
//   running sum: at worst L * 2^-24 ~ 1.3e-5 of the sum's scale (about sqrt(L) * 2^-24 ~ 1e-6 in
//   practice);
// - the central difference's truncation, h^2 |f'''| / 6 with h = 1e-3: ~3e-7 for tanh, whose
//   third derivative reaches 2, and below 1e-7 for the rest; the difference itself is exact
//   (representable points, evaluated in double).
// Measured on the CPU: 3.1e-7 at most (tanh; the linear layers 1.3e-7), whatever oneDNN's ISA.
// So 2e-5: above the worst case of fp32 rounding, and a gradient off by 0.01% fails.
constexpr double kGradientTolerance = 2e-5;

// Every entry is checked up to this many (the layers here have at most a few hundred); a larger
// tensor gets this many spread-out entries.
constexpr size_t kMaxChecked = 1000;

// Compares an analytic gradient with finite differences at every entry (up to kMaxChecked).
void check_gradient(const std::string& what, const Floats& analytic, Floats& values,
                    const std::function<double()>& loss, double tolerance = kGradientTolerance) {
  ASSERT_EQ(analytic.size(), values.size()) << what;
  double max_err = 0, scale = 1e-6;
  const size_t step = std::max<size_t>(1, values.size() / kMaxChecked);
  for (size_t i = 0; i < values.size(); i += step) {
    const double fd = finite_difference(values, i, loss);
    max_err = std::max(max_err, std::abs(fd - analytic[i]));
    scale = std::max(scale, std::abs(fd));
  }
  EXPECT_LT(max_err / scale, tolerance)
      << what << ": max error " << max_err << " of scale " << scale;
}

class LayerGradient : public testing::BackendTest {
 protected:
  void run(const Case& c) {
    auto layer = build(c.yaml, c.input.without_batch());
    Floats x = random(c.input.numel(), 11);
    if (c.kink_free_input) {
      // Distinct values 0.01 apart, none near zero: no ties in a pooling window, no relu kink.
      std::vector<int64_t> idx(static_cast<size_t>(c.input.numel()));
      std::iota(idx.begin(), idx.end(), 0);
      std::mt19937 g(5);
      std::shuffle(idx.begin(), idx.end(), g);
      for (size_t i = 0; i < x.size(); ++i)
        x[i] = (static_cast<float>(idx[i]) - 0.5f * static_cast<float>(x.size()) + 0.5f) * 0.01f;
    }
    std::vector<Floats> params;
    uint32_t seed = 20;
    for (Param& p : layer->params()) {
      params.push_back(random(p.shape.numel(), seed++, -0.5f, 0.5f));
      p.value = upload(p.shape, params.back());
      p.grad = output(p.shape);
    }
    const int64_t n = c.input[0];
    layer->allocate(be(), n);
    Tensor xt = upload(c.input, x);
    Tensor yt = output(layer->output_shape().with_batch(n));
    Context ctx{be(), true, 7, 3};
    layer->forward(ctx, xt, yt);
    const Floats r = random(yt.numel(), 99);
    Tensor dy = upload(yt.shape(), r);
    Tensor dx = output(c.input);
    layer->backward(ctx, xt, yt, dy, &dx);

    // The forward through the backend agrees with the reference too.
    EXPECT_CLOSE(download(yt), c.forward(x, params)) << c.name << " forward";
    auto loss = [&] { return objective(c.forward(x, params), r); };
    // cuDNN may take an FFT or Winograd algorithm, which rounds more (backend_test_util.h).
    const double tolerance = GetParam() != "cpu" && c.yaml.starts_with("conv2d")
                                 ? testing::kConvTolerance
                                 : kGradientTolerance;
    check_gradient(c.name + " input", download(dx), x, loss, tolerance);
    for (size_t k = 0; k < params.size(); ++k)
      check_gradient(c.name + " " + layer->params()[k].name, download(layer->params()[k].grad),
                     params[k], loss, tolerance);
  }
};

Doubles conv_ref(const Floats& x, const std::vector<Floats>& p, const ref::ConvShape& s,
                 const Conv2dParams& q) {
  return ref::conv2d_forward(x, p[0], p.size() > 1 ? p[1] : Floats{}, s, q);
}

Doubles dense_ref(const Floats& x, const std::vector<Floats>& p, int64_t n, int64_t in,
                  int64_t out) {
  Floats zero(static_cast<size_t>(n * out), 0.f);
  Doubles y = ref::gemm(zero, x, p[0], n, out, in, false, true, 1.0, 0.0);
  if (p.size() > 1)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < out; ++j)
        y[static_cast<size_t>(i * out + j)] += p[1][static_cast<size_t>(j)];
  return y;
}

Doubles act_ref(const Floats& x, Activation a, double alpha) {
  return ref::activation_forward(x, a, alpha);
}

TEST_P(LayerGradient, Dense) {
  run({"dense", "dense: {units: 7}", Shape{3, 5},
       [](const Floats& x, const std::vector<Floats>& p) { return dense_ref(x, p, 3, 5, 7); }});
}

TEST_P(LayerGradient, DenseWithoutBias) {
  run({"dense_nobias", "dense: {units: 4, bias: false}", Shape{1, 9},
       [](const Floats& x, const std::vector<Floats>& p) { return dense_ref(x, p, 1, 9, 4); }});
}

TEST_P(LayerGradient, Conv2dPadded) {
  Conv2dParams q;
  q.pad_h = q.pad_w = 1;
  run({"conv2d", "conv2d: {filters: 4, kernel: 3, padding: 1}", Shape{2, 3, 6, 5},
       [q](const Floats& x, const std::vector<Floats>& p) {
         return conv_ref(x, p, {2, 3, 6, 5, 4, 3, 3}, q);
       }});
}

TEST_P(LayerGradient, Conv2dGrouped) {
  Conv2dParams q;
  q.pad_h = q.pad_w = 1;
  q.groups = 2;
  run({"conv2d_grouped", "conv2d: {filters: 4, kernel: 3, padding: 1, groups: 2}",
       Shape{2, 6, 5, 5}, [q](const Floats& x, const std::vector<Floats>& p) {
         return conv_ref(x, p, {2, 6, 5, 5, 4, 3, 3}, q);
       }});
}

// Depthwise with a channel multiplier of 2, strided: each input channel has its own two filters.
TEST_P(LayerGradient, Conv2dDepthwise) {
  Conv2dParams q;
  q.stride_h = q.stride_w = 2;
  q.pad_h = q.pad_w = 1;
  q.groups = 3;
  run({"conv2d_depthwise", "conv2d: {filters: 6, kernel: 3, stride: 2, padding: 1, groups: 3}",
       Shape{2, 3, 7, 6}, [q](const Floats& x, const std::vector<Floats>& p) {
         return conv_ref(x, p, {2, 3, 7, 6, 6, 3, 3}, q);
       }});
}

TEST_P(LayerGradient, Conv2dStridedDilatedNonSquare) {
  Conv2dParams q;
  q.stride_h = 2;
  q.stride_w = 1;
  q.dilation_h = q.dilation_w = 2;
  q.pad_w = 1;
  run({"conv2d_strided",
       "conv2d: {filters: 3, kernel: [3, 2], stride: [2, 1], dilation: 2, padding: [0, 1]}",
       Shape{1, 2, 9, 7}, [q](const Floats& x, const std::vector<Floats>& p) {
         return conv_ref(x, p, {1, 2, 9, 7, 3, 3, 2}, q);
       }});
}

TEST_P(LayerGradient, Conv2dOneByOneWithoutBias) {
  Conv2dParams q;
  run({"conv2d_1x1", "conv2d: {filters: 5, kernel: 1, bias: false}", Shape{2, 3, 4, 4},
       [q](const Floats& x, const std::vector<Floats>& p) {
         return conv_ref(x, p, {2, 3, 4, 4, 5, 1, 1}, q);
       }});
}

TEST_P(LayerGradient, MaxPool) {
  Pool2dParams q;
  run({"maxpool", "maxpool: {kernel: 2, stride: 2}", Shape{2, 3, 6, 6},
       [q](const Floats& x, const std::vector<Floats>&) {
         return ref::pool2d_forward(x, 2, 3, 6, 6, q);
       },
       true});
}

TEST_P(LayerGradient, MaxPoolOverlappingPadded) {
  Pool2dParams q;
  q.kernel_h = q.kernel_w = 3;
  q.stride_h = q.stride_w = 2;
  q.pad_h = q.pad_w = 1;
  run({"maxpool_overlap", "maxpool: {kernel: 3, stride: 2, padding: 1}", Shape{1, 2, 7, 5},
       [q](const Floats& x, const std::vector<Floats>&) {
         return ref::pool2d_forward(x, 1, 2, 7, 5, q);
       },
       true});
}

TEST_P(LayerGradient, AvgPool) {
  Pool2dParams q;
  q.mode = PoolMode::kAverage;
  q.kernel_h = q.kernel_w = 3;
  q.stride_h = q.stride_w = 1;
  q.pad_h = q.pad_w = 1;
  run({"avgpool", "avgpool: {kernel: 3, stride: 1, padding: 1}", Shape{2, 2, 5, 4},
       [q](const Floats& x, const std::vector<Floats>&) {
         return ref::pool2d_forward(x, 2, 2, 5, 4, q);
       }});
}

TEST_P(LayerGradient, GlobalAvgPool) {
  Pool2dParams q;
  q.mode = PoolMode::kAverage;
  q.kernel_h = 3;
  q.kernel_w = 5;
  q.stride_h = q.stride_w = 1;
  run({"global_avgpool", "global_avgpool", Shape{2, 4, 3, 5},
       [q](const Floats& x, const std::vector<Floats>&) {
         return ref::pool2d_forward(x, 2, 4, 3, 5, q);
       }});
}

// keep_dims: false: (C) rather than (C,1,1), the same values.
TEST_P(LayerGradient, GlobalAvgPoolToFlat) {
  Pool2dParams q;
  q.mode = PoolMode::kAverage;
  q.kernel_h = 3;
  q.kernel_w = 5;
  q.stride_h = q.stride_w = 1;
  run({"global_avgpool_flat", "global_avgpool: {keep_dims: false}", Shape{2, 4, 3, 5},
       [q](const Floats& x, const std::vector<Floats>&) {
         return ref::pool2d_forward(x, 2, 4, 3, 5, q);
       }});
}

TEST_P(LayerGradient, Relu) {
  run({"relu", "relu", Shape{3, 4, 5},
       [](const Floats& x, const std::vector<Floats>&) { return act_ref(x, Activation::kRelu, 0); },
       true});
}

TEST_P(LayerGradient, LeakyRelu) {
  run({"leaky_relu", "leaky_relu: {alpha: 0.1}", Shape{2, 30},
       [](const Floats& x, const std::vector<Floats>&) {
         return act_ref(x, Activation::kLeakyRelu, 0.1);
       },
       true});
}

TEST_P(LayerGradient, Sigmoid) {
  run({"sigmoid", "sigmoid", Shape{2, 3, 7}, [](const Floats& x, const std::vector<Floats>&) {
         return act_ref(x, Activation::kSigmoid, 0);
       }});
}

TEST_P(LayerGradient, Tanh) {
  run({"tanh", "tanh", Shape{5, 11}, [](const Floats& x, const std::vector<Floats>&) {
         return act_ref(x, Activation::kTanh, 0);
       }});
}

// The kinds after the first four, each as its config writes it: x near 0 crosses relu6's kink
// (kink-free input there), hardswish and hardsigmoid are checked on their middle piece.
TEST_P(LayerGradient, ModernActivations) {
  const struct {
    const char* yaml;
    Activation kind;
    double alpha;
  } cases[] = {{"relu6", Activation::kRelu6, 0},
               {"silu", Activation::kSilu, 0},
               {"hardswish", Activation::kHardSwish, 0},
               {"hardsigmoid", Activation::kHardSigmoid, 0},
               {"gelu", Activation::kGelu, 0},
               {"gelu: {approximate: tanh}", Activation::kGeluTanh, 0},
               {"elu: {alpha: 0.7}", Activation::kElu, 0.7},
               {"softplus", Activation::kSoftplus, 0},
               {"mish", Activation::kMish, 0}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.yaml);
    const Activation kind = c.kind;
    const double alpha = c.alpha;
    run({activation_name(kind), c.yaml, Shape{3, 4, 5},
         [kind, alpha](const Floats& x, const std::vector<Floats>&) {
           return act_ref(x, kind, alpha);
         },
         kind == Activation::kRelu6});
  }
}

TEST_P(LayerGradient, Dropout) {
  // Context seed 7, step 3, layer index 0: the stream the layer documents.
  const uint64_t stream = (3ull << 16) | 0;
  run({"dropout", "dropout: {rate: 0.3}", Shape{4, 25},
       [stream](const Floats& x, const std::vector<Floats>&) {
         Doubles m = ref::dropout_mask(static_cast<int64_t>(x.size()), 0.3, 7, stream);
         Doubles y(x.size());
         for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * m[i];
         return y;
       }});
}

// Batch normalization while training: the batch's statistics depend on every input, so each
// input's gradient has the terms through the mean and the variance too.
TEST_P(LayerGradient, BatchNormSpatial) {
  run({"batchnorm", "batchnorm", Shape{3, 4, 5, 3},
       [](const Floats& x, const std::vector<Floats>& p) {
         return ref::batchnorm_training(x, p[0], p[1], 3, 4, 15, 1e-5).y;
       }});
}

TEST_P(LayerGradient, BatchNormFlat) {
  run({"batchnorm_flat", "batchnorm: {eps: 1.0e-3, momentum: 0.5}", Shape{6, 5},
       [](const Floats& x, const std::vector<Floats>& p) {
         return ref::batchnorm_training(x, p[0], p[1], 6, 5, 1, 1e-3).y;
       }});
}

// Group normalization: as group, layer (groups 1) and instance (groups C) normalization of
// images, and of a flat input. Every input of a group reaches each of its outputs through the
// group's mean and variance.
TEST_P(LayerGradient, GroupNorm) {
  for (int64_t groups : {2, 1, 6}) {
    run({"groupnorm_" + std::to_string(groups),
         "groupnorm: {groups: " + std::to_string(groups) + "}", Shape{2, 6, 3, 5},
         [groups](const Floats& x, const std::vector<Floats>& p) {
           return ref::groupnorm(x, p[0], p[1], 2, 6, 15, groups, 1e-5);
         }});
  }
  run({"groupnorm_flat", "groupnorm: {groups: 3, eps: 1.0e-3}", Shape{3, 9},
       [](const Floats& x, const std::vector<Floats>& p) {
         return ref::groupnorm(x, p[0], p[1], 3, 9, 1, 3, 1e-3);
       }});
}

// Stochastic depth: each sample kept whole (scaled by 1 / (1 - rate)) or dropped whole, by the
// dropout rule's number of its index in the layer's stream.
TEST_P(LayerGradient, DropPath) {
  const uint64_t stream = (3ull << 16) | 0;  // seed 7, step 3, layer index 0
  const int64_t n = 8, per_sample = 2 * 3 * 3;
  run({"drop_path", "drop_path: {rate: 0.4}", Shape{n, 2, 3, 3},
       [&](const Floats& x, const std::vector<Floats>&) {
         const Doubles m = ref::dropout_mask(n, 0.4, 7, stream);
         Doubles y(x.size());
         for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * m[i / per_sample];
         return y;
       }});
  const Doubles m = ref::dropout_mask(n, 0.4, 7, stream);
  const auto kept = std::count_if(m.begin(), m.end(), [](double v) { return v != 0; });
  EXPECT_GT(kept, 0);  // the case sees both kinds of sample
  EXPECT_LT(kept, n);
}

// Ceil mode's last, partial windows on odd sizes.
TEST_P(LayerGradient, PoolCeilMode) {
  Pool2dParams q;
  q.kernel_h = q.kernel_w = 3;
  q.stride_h = q.stride_w = 2;
  q.ceil_mode = true;
  run({"maxpool_ceil", "maxpool: {kernel: 3, stride: 2, ceil_mode: true}", Shape{2, 2, 6, 7},
       [q](const Floats& x, const std::vector<Floats>&) {
         return ref::pool2d_forward(x, 2, 2, 6, 7, q);
       },
       true});
  q.mode = PoolMode::kAverage;
  q.kernel_h = q.kernel_w = 2;
  q.pad_h = q.pad_w = 1;
  run({"avgpool_ceil", "avgpool: {kernel: 2, stride: 2, padding: 1, ceil_mode: true}",
       Shape{1, 3, 5, 6}, [q](const Floats& x, const std::vector<Floats>&) {
         return ref::pool2d_forward(x, 1, 3, 5, 6, q);
       }});
}

// The plain one-hot target and label smoothing's.
TEST_P(LayerGradient, SoftmaxCrossEntropyLoss) {
  for (double e : {0.0, 0.2}) {
    SCOPED_TRACE("label smoothing " + std::to_string(e));
    auto loss = make_loss("softmax_cross_entropy", e);
    const int64_t n = 4, c = 6;
    loss->allocate(be(), n, c);
    Floats logits = random(n * c, 3, -2.f, 2.f);
    std::vector<int32_t> labels{0, 5, 2, 2};
    Tensor lt = upload(Shape{n, c}, logits), yt = upload_labels(labels), value = output(Shape{1});
    Tensor grad = output(Shape{n, c});
    Context ctx{be(), true, 0, 0};
    loss->forward(ctx, lt, yt, value);
    loss->backward(ctx, lt, yt, grad);
    EXPECT_NEAR(download(value)[0], ref::softmax_cross_entropy(logits, labels, n, c, e), 1e-5);
    check_gradient("softmax_cross_entropy", download(grad), logits,
                   [&] { return ref::softmax_cross_entropy(logits, labels, n, c, e); });
  }
}

TEST_P(LayerGradient, MseLoss) {
  auto loss = make_loss("mse");
  const int64_t n = 3, c = 5;
  loss->allocate(be(), n, c);
  Floats pred = random(n * c, 4);
  std::vector<int32_t> labels{4, 0, 1};
  Tensor pt = upload(Shape{n, c}, pred), yt = upload_labels(labels), value = output(Shape{1});
  Tensor grad = output(Shape{n, c});
  Context ctx{be(), true, 0, 0};
  loss->forward(ctx, pt, yt, value);
  loss->backward(ctx, pt, yt, grad);
  EXPECT_NEAR(download(value)[0], ref::mse(pred, labels, n, c), 1e-5);
  check_gradient("mse", download(grad), pred, [&] { return ref::mse(pred, labels, n, c); });
}

TANDEM_INSTANTIATE_BACKEND_SUITE(LayerGradient);

}  // namespace
}  // namespace tandem
