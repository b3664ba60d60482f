// ONNX's own operator test cases (the backend node tests, Debian libonnx-testdata) through the
// Backend ops of every backend (Flatten and Dropout through the layers and the graph, as a model
// runs them): a second, outside reference for the ops the layers use.
//
// Each case is a one-node model (model.onnx) with inputs and expected outputs (test_data_set_*/
// input_*.pb, output_*.pb). A case whose operator tandem has, with attributes its ops express,
// runs and must match within ONNX's own tolerance (numpy's allclose, rtol 1e-3, atol 1e-7); a case
// that asks for what tandem has no op for (ceil mode, auto_pad, 1-D or 3-D windows, broadcasting,
// integer types, ...) is not instantiated: the coverage test lists each one once, with the reason.
//
// Documented differences of semantics (not run, never approximated):
// - AveragePool with count_include_pad=1 and padding: tandem's average pooling always leaves the
//   padding out of the divisor (PyTorch's count_include_pad=False); it exports count_include_pad=0.
// - BatchNormalization in training mode: ONNX's momentum weights the old running value (tandem's,
//   as PyTorch's, the batch's: tandem's momentum is 1 - ONNX's), and ONNX's running variance takes
//   in the batch's biased variance, tandem's the unbiased one (M / (M - 1) times it, M the values
//   per channel). The case runs with the momentum converted, and its expected running variance
//   converted the same way.
// - Dropout in training mode: the masks come from tandem's Philox stream, not ONNX's.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "engine/backend.h"
#include "engine/backend_registry.h"
#include "engine/config.h"
#include "engine/error.h"
#include "engine/graph.h"
#include "engine/layer.h"
#include "engine/layer_registry.h"
#include "engine/tensor.h"

namespace tandem::testing {
namespace {

namespace fs = std::filesystem;

const std::string kDataDir = TANDEM_ONNX_TESTDATA_DIR;  // .../onnx/backend/test/data/node

// The operators whose cases run, by the prefix of their case folders' names.
const std::vector<std::pair<std::string, std::string>> kOperators = {
    {"Conv", "conv"},
    {"Conv", "basic_conv"},
    {"MaxPool", "maxpool"},
    {"AveragePool", "averagepool"},
    {"GlobalAveragePool", "globalaveragepool"},
    {"Relu", "relu"},
    {"LeakyRelu", "leakyrelu"},
    {"Sigmoid", "sigmoid"},
    {"Tanh", "tanh"},
    {"Elu", "elu"},
    {"HardSwish", "hardswish"},
    {"Softplus", "softplus"},
    {"Gemm", "gemm"},
    {"BatchNormalization", "batchnorm"},
    {"Softmax", "softmax"},
    {"Add", "add"},
    {"Concat", "concat"},
    {"Flatten", "flatten"},
    {"Dropout", "dropout"},
};

// The case folders of those operators, without "test_", sorted; {"no_test_data"} when the data
// set is not installed (the one test then skips and says so).
std::vector<std::string> case_names() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(kDataDir, ec)) {
    const std::string name = e.path().filename().string();
    if (!name.starts_with("test_")) continue;
    const std::string rest = name.substr(5);
    for (const auto& [op, prefix] : kOperators)
      if (rest == prefix || rest.starts_with(prefix + "_")) {
        names.push_back(rest);
        break;
      }
  }
  std::sort(names.begin(), names.end());
  if (names.empty()) names.push_back("no_test_data");
  return names;
}

// A tensor of a case: its values as floats when its type is float.
struct HostTensor {
  std::vector<int64_t> dims;
  int32_t type = onnx::TensorProto::UNDEFINED;
  std::vector<float> values;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
};

HostTensor from_proto(const onnx::TensorProto& t) {
  HostTensor h;
  h.dims.assign(t.dims().begin(), t.dims().end());
  h.type = t.data_type();
  if (h.type == onnx::TensorProto::FLOAT) {
    if (t.has_raw_data()) {
      h.values.resize(t.raw_data().size() / sizeof(float));
      std::memcpy(h.values.data(), t.raw_data().data(), h.values.size() * sizeof(float));
    } else {
      h.values.assign(t.float_data().begin(), t.float_data().end());
    }
  } else if (h.type == onnx::TensorProto::BOOL) {  // Dropout's training_mode: 0 or 1
    if (t.has_raw_data())
      for (char b : t.raw_data()) h.values.push_back(b ? 1.f : 0.f);
    else
      for (int32_t b : t.int32_data()) h.values.push_back(b ? 1.f : 0.f);
  }
  return h;
}

template <typename Proto>
Proto read_proto(const fs::path& path) {
  Proto p;
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f && p.ParseFromIstream(&f)) << "cannot parse " << path;
  return p;
}

// One case: its node, opset, and data sets (inputs by the node's input slots; "" slots empty).
struct Case {
  std::string name;
  onnx::ModelProto model;
  std::vector<std::vector<HostTensor>> inputs, outputs;  // per data set
};

Case load_case(const std::string& name) {
  Case c;
  c.name = name;
  const fs::path dir = fs::path(kDataDir) / ("test_" + name);
  c.model = read_proto<onnx::ModelProto>(dir / "model.onnx");
  std::vector<fs::path> sets;
  for (const fs::directory_entry& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().starts_with("test_data_set_"))
      sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  for (const fs::path& set : sets) {
    std::vector<HostTensor> ins, outs;
    for (int k = 0; fs::exists(set / ("input_" + std::to_string(k) + ".pb")); ++k)
      ins.push_back(
          from_proto(read_proto<onnx::TensorProto>(set / ("input_" + std::to_string(k) + ".pb"))));
    for (int k = 0; fs::exists(set / ("output_" + std::to_string(k) + ".pb")); ++k)
      outs.push_back(
          from_proto(read_proto<onnx::TensorProto>(set / ("output_" + std::to_string(k) + ".pb"))));
    c.inputs.push_back(std::move(ins));
    c.outputs.push_back(std::move(outs));
  }
  return c;
}

const onnx::AttributeProto* attribute(const onnx::NodeProto& n, const std::string& name) {
  for (const onnx::AttributeProto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}
int64_t get_int(const onnx::NodeProto& n, const std::string& name, int64_t fallback) {
  const onnx::AttributeProto* a = attribute(n, name);
  return a ? a->i() : fallback;
}
float get_float(const onnx::NodeProto& n, const std::string& name, float fallback) {
  const onnx::AttributeProto* a = attribute(n, name);
  return a ? a->f() : fallback;
}
std::vector<int64_t> get_ints(const onnx::NodeProto& n, const std::string& name,
                              std::vector<int64_t> fallback) {
  const onnx::AttributeProto* a = attribute(n, name);
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : fallback;
}
std::string get_string(const onnx::NodeProto& n, const std::string& name,
                       const std::string& fallback) {
  const onnx::AttributeProto* a = attribute(n, name);
  return a ? a->s() : fallback;
}

std::string dims_str(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t k = 0; k < dims.size(); ++k) s += (k ? ", " : "") + std::to_string(dims[k]);
  return s + "]";
}

int64_t product(const std::vector<int64_t>& dims, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t k = from; k < to; ++k) n *= dims[k];
  return n;
}

// Why tandem's ops cannot run a case as ONNX defines it; "" when they can. Decided from the model
// and the first data set alone, so that the coverage listing needs no backend.
std::string why_not(const Case& c) {
  const onnx::GraphProto& g = c.model.graph();
  if (g.node_size() != 1)
    return "the operator expanded into " + std::to_string(g.node_size()) +
           " primitive nodes (its function body); the one-node case runs";
  const onnx::NodeProto& n = g.node(0);
  const std::string& op = n.op_type();
  bool known = false;
  for (const auto& [name, prefix] : kOperators) known = known || name == op;
  if (!known) return op + ": tandem has no such op";
  if (c.inputs.empty()) return "no test data set";
  for (const HostTensor& t : c.inputs[0])
    if (t.type != onnx::TensorProto::FLOAT &&
        !(op == "Dropout" && t.type == onnx::TensorProto::BOOL))
      return "input of ONNX type " + std::to_string(t.type) + ": tandem's ops are float32";
  const std::vector<HostTensor>& in = c.inputs[0];
  const size_t rank = in[0].dims.size();
  auto symmetric = [](const std::vector<int64_t>& pads) {
    const size_t h = pads.size() / 2;
    for (size_t k = 0; k < h; ++k)
      if (pads[k] != pads[k + h]) return false;
    return true;
  };
  if (op == "Conv" || op == "MaxPool" || op == "AveragePool") {
    if (rank != 4) return std::to_string(rank - 2) + "-D " + op + ": tandem's are 2-D";
    if (const std::string pad = get_string(n, "auto_pad", "NOTSET"); pad != "NOTSET")
      return "auto_pad " + pad + ": tandem takes explicit padding";
    if (!symmetric(get_ints(n, "pads", {0, 0, 0, 0})))
      return "asymmetric pads " + dims_str(get_ints(n, "pads", {})) +
             ": tandem pads both ends alike";
  }
  if (op == "MaxPool" || op == "AveragePool") {
    if (get_int(n, "ceil_mode", 0) != 0) return "ceil_mode 1: tandem's windows are floor mode";
    for (int64_t d : get_ints(n, "dilations", {}))
      if (d != 1) return "dilated pooling: tandem's pooling windows are dense";
    if (n.output_size() > 1) return "the Indices output: tandem's max pooling returns no indices";
  }
  if (op == "AveragePool" && get_int(n, "count_include_pad", 0) != 0) {
    for (int64_t p : get_ints(n, "pads", {}))
      if (p != 0)
        return "count_include_pad 1 with padding: tandem's average pooling leaves padding out of "
               "the divisor";
  }
  if (op == "GlobalAveragePool" && rank != 4)
    return std::to_string(rank - 2) + "-D GlobalAveragePool: tandem's pooling is 2-D";
  if (op == "Gemm") {
    if (in.size() > 2 && !in[2].dims.empty()) {
      // C broadcasts to (M, N) by numpy's rules.
      const std::vector<int64_t>& cd = in[2].dims;
      if (cd.size() > 2) return "a bias C of rank 3";
    }
  }
  if (op == "BatchNormalization") {
    if (rank < 2 || rank > 4) return "input of rank " + std::to_string(rank);
    if (n.output_size() != 1 && n.output_size() != 3)
      return std::to_string(n.output_size()) +
             " outputs: tandem's training forward gives the "
             "output and the running mean and variance";
  }
  if (op == "Add" && (in[0].dims != in[1].dims))
    return "broadcasting " + dims_str(in[1].dims) + " to " + dims_str(in[0].dims) +
           ": tandem's add takes two tensors of one shape";
  if (op == "Softmax") {
    const int opset = c.model.opset_import(0).version();
    const int64_t axis = get_int(n, "axis", opset >= 13 ? -1 : 1);
    const int64_t a = axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
    if (opset >= 13 && a != static_cast<int64_t>(rank) - 1)
      return "softmax along axis " + std::to_string(axis) + " of " + std::to_string(rank) +
             ": tandem's softmax is over the last axis (the classes of (N, classes))";
  }
  if (op == "Flatten") {
    const int64_t axis = get_int(n, "axis", 1);
    if (axis != 1)
      return "axis " + std::to_string(axis) +
             ": tandem's flatten keeps the batch axis, (N, ...) "
             "-> (N, features)";
  }
  if (op == "Dropout") {
    if (get_int(n, "is_test", 1) == 0 ||
        (in.size() > 2 && !in[2].values.empty() && in[2].values[0] != 0.f))
      return "training mode: tandem draws its masks from its own Philox stream";
    if (n.output_size() > 1) return "the mask output: tandem's dropout gives none in inference";
  }
  return "";
}

class OnnxConformance : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  void SetUp() override {
    register_builtin_layers();
    if (std::get<1>(GetParam()) == "no_test_data")
      GTEST_SKIP() << "ONNX's operator test cases are not installed (expected in " << kDataDir
                   << "): apt-get install libonnx-testdata";
    try {
      backend_ = create_backend(std::get<0>(GetParam()), {});
    } catch (const DeviceError& e) {
      GTEST_SKIP() << "backend '" << std::get<0>(GetParam()) << "' unavailable: " << e.cause()
                   << " (" << e.hint() << ")";
    }
  }

  Backend& be() { return *backend_; }

  Tensor upload(const Shape& s, const std::vector<float>& host) {
    Tensor t(be(), s);
    EXPECT_EQ(static_cast<int64_t>(host.size()), t.numel());
    be().upload(t, host.data());
    return t;
  }
  Tensor upload(const HostTensor& h) { return upload(Shape(h.dims), h.values); }
  Tensor output(const Shape& s) {
    Tensor t(be(), s);
    be().fill(t, NAN);  // an entry the op leaves unwritten fails the comparison
    return t;
  }
  HostTensor download(const Tensor& t, std::vector<int64_t> dims) {
    be().synchronize();
    HostTensor h;
    h.dims = std::move(dims);
    h.type = onnx::TensorProto::FLOAT;
    h.values.resize(static_cast<size_t>(t.numel()));
    be().download(h.values.data(), t);
    return h;
  }

  // x through a model of `layers` (YAML list entries) built by tandem's graph, in inference;
  // its output read as dims.
  HostTensor run_model(const std::string& layers, const HostTensor& x,
                       const std::vector<int64_t>& dims) {
    // A rank-1 tensor is one sample of its length (a model's input has a batch axis).
    std::vector<int64_t> d = x.dims;
    if (d.size() == 1) d.insert(d.begin(), 1);
    std::string sample;
    for (size_t k = 1; k < d.size(); ++k) sample += (k > 1 ? ", " : "") + std::to_string(d[k]);
    Config config = parse_config(
        "name: onnx_case\ninput: {shape: [" + sample + "]}\nlayers:\n" + layers, "onnx_case.yaml");
    Graph graph(config);
    const int64_t batch = d[0];
    graph.allocate(be(), batch, 1);
    be().upload(graph.input(), x.values.data());
    Context ctx{be(), false, 1, 0};
    return download(graph.forward(ctx, batch), dims);
  }

  // The node's outputs on one data set, computed by the backend's ops.
  std::vector<HostTensor> run(const onnx::NodeProto& n, int opset,
                              const std::vector<HostTensor>& in);

  std::unique_ptr<Backend> backend_;
};

std::vector<HostTensor> OnnxConformance::run(const onnx::NodeProto& n, int opset,
                                             const std::vector<HostTensor>& in) {
  const std::string& op = n.op_type();
  const std::vector<int64_t>& xd = in[0].dims;
  if (op == "Conv") {
    // x (N,C,H,W), w (K,C/group,R,S), b (K) -> y (N,K,P,Q).
    const std::vector<int64_t>& wd = in[1].dims;
    const auto s = get_ints(n, "strides", {1, 1}), p = get_ints(n, "pads", {0, 0, 0, 0}),
               d = get_ints(n, "dilations", {1, 1});
    Conv2dParams cp;
    cp.stride_h = static_cast<int>(s[0]), cp.stride_w = static_cast<int>(s[1]);
    cp.pad_h = static_cast<int>(p[0]), cp.pad_w = static_cast<int>(p[1]);
    cp.dilation_h = static_cast<int>(d[0]), cp.dilation_w = static_cast<int>(d[1]);
    cp.groups = static_cast<int>(get_int(n, "group", 1));
    const std::vector<int64_t> yd = {
        xd[0], wd[0],
        conv_out_size(xd[2], static_cast<int>(wd[2]), cp.stride_h, cp.pad_h, cp.dilation_h),
        conv_out_size(xd[3], static_cast<int>(wd[3]), cp.stride_w, cp.pad_w, cp.dilation_w)};
    Tensor x = upload(in[0]), w = upload(in[1]), y = output(Shape(yd));
    const bool bias = in.size() > 2 && !in[2].dims.empty();
    Tensor b = bias ? upload(in[2]) : Tensor();
    be().conv2d_forward(y, x, w, bias ? &b : nullptr, cp);
    return {download(y, yd)};
  }
  if (op == "MaxPool" || op == "AveragePool" || op == "GlobalAveragePool") {
    Pool2dParams pp;
    pp.mode = op == "MaxPool" ? PoolMode::kMax : PoolMode::kAverage;
    if (op == "GlobalAveragePool") {
      pp.kernel_h = static_cast<int>(xd[2]), pp.kernel_w = static_cast<int>(xd[3]);
      pp.stride_h = pp.stride_w = 1;
      pp.pad_h = pp.pad_w = 0;
    } else {
      const auto k = get_ints(n, "kernel_shape", {}), s = get_ints(n, "strides", {1, 1}),
                 p = get_ints(n, "pads", {0, 0, 0, 0});
      pp.kernel_h = static_cast<int>(k[0]), pp.kernel_w = static_cast<int>(k[1]);
      pp.stride_h = static_cast<int>(s[0]), pp.stride_w = static_cast<int>(s[1]);
      pp.pad_h = static_cast<int>(p[0]), pp.pad_w = static_cast<int>(p[1]);
    }
    const std::vector<int64_t> yd = {xd[0], xd[1],
                                     conv_out_size(xd[2], pp.kernel_h, pp.stride_h, pp.pad_h),
                                     conv_out_size(xd[3], pp.kernel_w, pp.stride_w, pp.pad_w)};
    Tensor x = upload(in[0]), y = output(Shape(yd));
    be().pool2d_forward(y, x, pp);
    return {download(y, yd)};
  }
  if (op == "Relu" || op == "LeakyRelu" || op == "Sigmoid" || op == "Tanh" || op == "Elu" ||
      op == "HardSwish" || op == "Softplus") {
    const Activation a = op == "Relu"        ? Activation::kRelu
                         : op == "LeakyRelu" ? Activation::kLeakyRelu
                         : op == "Sigmoid"   ? Activation::kSigmoid
                         : op == "Tanh"      ? Activation::kTanh
                         : op == "Elu"       ? Activation::kElu
                         : op == "HardSwish" ? Activation::kHardSwish
                                             : Activation::kSoftplus;
    const Shape flat{in[0].numel()};  // elementwise: any shape
    Tensor x = upload(flat, in[0].values), y = output(flat);
    be().activation_forward(y, x, a, get_float(n, "alpha", op == "Elu" ? 1.f : 0.01f));
    return {download(y, xd)};
  }
  if (op == "Gemm") {
    // y (M,N) = alpha op(A) op(B) + beta C, C broadcast to (M,N) (numpy's rules) into y first.
    const bool ta = get_int(n, "transA", 0) != 0, tb = get_int(n, "transB", 0) != 0;
    const int64_t m = ta ? xd[1] : xd[0], cols = tb ? in[1].dims[0] : in[1].dims[1];
    const std::vector<int64_t> yd = {m, cols};
    Tensor a = upload(in[0]), b = upload(in[1]), y = output(Shape(yd));
    float beta = get_float(n, "beta", 1.f);
    if (in.size() > 2 && !in[2].values.empty()) {
      const HostTensor& c = in[2];
      std::vector<int64_t> cd = c.dims;
      while (cd.size() < 2) cd.insert(cd.begin(), 1);
      std::vector<float> full(static_cast<size_t>(m * cols));
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < cols; ++j)
          full[static_cast<size_t>(i * cols + j)] =
              c.values[static_cast<size_t>((cd[0] == 1 ? 0 : i) * cd[1] + (cd[1] == 1 ? 0 : j))];
      be().upload(y, full.data());
    } else {
      beta = 0.f;
    }
    be().gemm(y, a, b, ta, tb, get_float(n, "alpha", 1.f), beta);
    return {download(y, yd)};
  }
  if (op == "BatchNormalization") {
    // x (N,C,...) per channel; rank 3 (N,C,L) as (N,C,L,1).
    std::vector<int64_t> d4 = xd;
    if (d4.size() == 3) d4.push_back(1);
    Tensor x = upload(Shape(d4), in[0].values), y = output(Shape(d4));
    Tensor gamma = upload(in[1]), beta = upload(in[2]), mean = upload(in[3]), var = upload(in[4]);
    const float eps = get_float(n, "epsilon", 1e-5f);
    if (n.output_size() == 1) {
      be().batchnorm_forward_inference(y, x, gamma, beta, mean, var, eps);
      return {download(y, xd)};
    }
    // Training: the batch's statistics, and the running ones moved (in place) with tandem's
    // momentum, 1 - ONNX's.
    const Shape c{xd[1]};
    Tensor save_mean = output(c), save_inv_std = output(c);
    be().batchnorm_forward_training(y, save_mean, save_inv_std, mean, var, x, gamma, beta,
                                    1.f - get_float(n, "momentum", 0.9f), eps);
    return {download(y, xd), download(mean, in[3].dims), download(var, in[4].dims)};
  }
  if (op == "Softmax") {
    // (rows, classes): the last axis (opset 13), or the axes from `axis` on (older opsets).
    const size_t rank = xd.size();
    int64_t axis = get_int(n, "axis", opset >= 13 ? -1 : 1);
    if (axis < 0) axis += static_cast<int64_t>(rank);
    const int64_t rows = product(xd, 0, static_cast<size_t>(axis));
    const int64_t classes = product(xd, static_cast<size_t>(axis), rank);
    Tensor logits = upload(Shape{rows, classes}, in[0].values), probs = output({rows, classes});
    Tensor loss(be(), Shape{1}), labels(be(), Shape{rows}, DType::kI32);
    const std::vector<int32_t> zeros(static_cast<size_t>(rows), 0);
    be().upload(labels, zeros.data());
    be().softmax_cross_entropy_forward(loss, probs, logits, labels, 0.f);
    return {download(probs, xd)};
  }
  if (op == "Add") {
    Tensor a = upload(in[0]), b = upload(in[1]), y = output(Shape(xd));
    be().add(y, a, b);
    return {download(y, xd)};
  }
  if (op == "Concat") {
    // Every input as (outer, inner_k): the rows copy_columns joins along.
    int64_t axis = get_int(n, "axis", 0);
    if (axis < 0) axis += static_cast<int64_t>(xd.size());
    const int64_t outer = product(xd, 0, static_cast<size_t>(axis));
    std::vector<int64_t> yd = xd;
    yd[static_cast<size_t>(axis)] = 0;
    for (const HostTensor& t : in)
      yd[static_cast<size_t>(axis)] += t.dims[static_cast<size_t>(axis)];
    const int64_t width = product(yd, static_cast<size_t>(axis), yd.size());
    Tensor y = output(Shape{outer, width});
    int64_t at = 0;
    for (const HostTensor& t : in) {
      const int64_t inner = t.numel() / outer;
      Tensor x = upload(Shape{outer, inner}, t.values);
      be().copy_columns(y, at, x, 0, inner);
      at += inner;
    }
    return {download(y, yd)};
  }
  if (op == "Flatten" || op == "Dropout") {
    // Through tandem's layers as a model runs them: flatten is the graph's view of its input as
    // (N, features); dropout outside training is the layer's copy (a flatten after it makes the
    // model's output flat, as the graph requires).
    float rate = get_float(n, "ratio", 0.5f);
    if (op == "Dropout" && in.size() > 1 && !in[1].values.empty()) rate = in[1].values[0];
    const std::string layers =
        op == "Flatten" ? "  - flatten\n"
                        : "  - dropout: {rate: " + std::to_string(rate) + "}\n  - flatten\n";
    const std::vector<int64_t> yd =
        op == "Flatten" ? std::vector<int64_t>{xd[0], in[0].numel() / xd[0]} : xd;
    return {run_model(layers, in[0], yd)};
  }
  ADD_FAILURE() << "no runner for " << op;
  return {};
}

// A data set's expected outputs as tandem defines them: ONNX's, except for the running variance of
// batch normalization in training, where the batch's variance enters unbiased (see the top).
std::vector<HostTensor> expected(const Case& c, size_t set) {
  std::vector<HostTensor> want = c.outputs[set];
  const onnx::NodeProto& n = c.model.graph().node(0);
  if (n.op_type() == "BatchNormalization" && want.size() == 3) {
    // ONNX: out = var * mom + biased * (1 - mom); tandem: var * mom + biased * M/(M-1) * (1 - mom)
    // = out + (out - var * mom) / (M - 1).
    const HostTensor& x = c.inputs[set][0];
    const std::vector<float>& var = c.inputs[set][4].values;
    const double m = static_cast<double>(x.numel() / x.dims[1]);
    const double mom = get_float(n, "momentum", 0.9f);
    for (size_t k = 0; k < var.size(); ++k) {
      float& out = want[2].values[k];
      out = static_cast<float>(out + (out - var[k] * mom) / (m - 1));
    }
  }
  return want;
}

TEST_P(OnnxConformance, MatchesExpectedOutputs) {
  const Case c = load_case(std::get<1>(GetParam()));
  ASSERT_EQ(why_not(c), "") << c.name << " was instantiated, yet cannot run";
  const onnx::NodeProto& n = c.model.graph().node(0);
  const int opset = static_cast<int>(c.model.opset_import(0).version());
  for (size_t set = 0; set < c.inputs.size(); ++set) {
    const std::vector<HostTensor> got = run(n, opset, c.inputs[set]);
    const std::vector<HostTensor> want = expected(c, set);
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) {
      SCOPED_TRACE("test_data_set_" + std::to_string(set) + ", output " + std::to_string(k));
      ASSERT_EQ(got[k].dims, want[k].dims)
          << dims_str(got[k].dims) << " vs " << dims_str(want[k].dims);
      ASSERT_EQ(got[k].values.size(), want[k].values.size());
      int bad = 0;
      for (size_t i = 0; i < want[k].values.size(); ++i) {
        const float g = got[k].values[i], w = want[k].values[i];
        const bool ok = (std::isnan(g) && std::isnan(w)) ||
                        std::abs(static_cast<double>(g) - w) <= 1e-7 + 1e-3 * std::abs(w);
        if (!ok && ++bad <= 5)
          ADD_FAILURE() << "element " << i << ": got " << g << ", expected " << w;
      }
      EXPECT_EQ(bad, 0) << bad << " of " << want[k].values.size() << " elements differ";
    }
  }
}

std::string param_name(const ::testing::TestParamInfo<std::tuple<std::string, std::string>>& i) {
  return std::get<0>(i.param) + "_" + std::get<1>(i.param);
}

// Only the cases tandem can run are instantiated (a case it cannot is listed once, with the
// reason, by the coverage test below), on every backend: a GPU's case skips where there is none.
std::vector<std::string> runnable_case_names() {
  std::vector<std::string> names;
  for (const std::string& name : case_names())
    if (name == "no_test_data" || why_not(load_case(name)).empty()) names.push_back(name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Backends, OnnxConformance,
                         ::testing::Combine(::testing::Values("cpu", "gpu"),
                                            ::testing::ValuesIn(runnable_case_names())),
                         param_name);

// The listing of what runs and what is skipped, and why; and a guard that the runner does not
// skip everything: every operator tandem has runs at least one of ONNX's cases.
TEST(OnnxConformanceCoverage, EveryOperatorRunsSomeCaseAndTheSkippedAreListed) {
  if (!fs::exists(kDataDir))
    GTEST_SKIP() << "ONNX's operator test cases are not installed (expected in " << kDataDir
                 << "): apt-get install libonnx-testdata";
  std::map<std::string, int> ran;
  int runs = 0;
  std::string skipped;
  for (const std::string& name : case_names()) {
    const Case c = load_case(name);
    const std::string why = why_not(c);
    if (!why.empty()) {
      skipped += "  test_" + name + ": " + why + "\n";
      continue;
    }
    ++ran[c.model.graph().node(0).op_type()];
    ++runs;
  }
  std::cout << "ONNX node test cases run through the backend ops: " << runs
            << "; not run (what tandem does not express, so never instantiated):\n"
            << skipped;
  for (const auto& [op, prefix] : kOperators) EXPECT_GT(ran[op], 0) << op << " runs no case";
}

}  // namespace
}  // namespace tandem::testing
