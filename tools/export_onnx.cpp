// trainer export: each layer of a tandem graph as the ONNX nodes that compute the same, the weights
// as initializers, through the ONNX project's generated protobuf classes and its checker.
#include "tools/export_onnx.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "engine/atomic_file.h"
#include "engine/error.h"
#include "engine/json_text.h"
#include "engine/progress.h"
#include "engine/report.h"
#include "engine/text.h"
#include "layers/activation.h"
#include "layers/batchnorm.h"
#include "layers/conv2d.h"
#include "layers/dense.h"
#include "layers/groupnorm.h"
#include "layers/merge.h"
#include "layers/pool2d.h"
#include "tools/app.h"
#include "tools/checkpoint_model.h"

namespace tandem {

namespace {

namespace fs = std::filesystem;

// ONNX stores raw tensor data little-endian, as this host holds floats.
static_assert(std::endian::native == std::endian::little);

// Builds the graph: value names kept unique (a layer's output is named after the layer, which a
// user may have called "logits" or "conv2d_1.weight").
class GraphBuilder {
 public:
  GraphBuilder(onnx::GraphProto* g, Backend& backend) : g_(g), backend_(backend) {}

  std::string unique(const std::string& name) {
    std::string n = name;
    for (int k = 1; used_.count(n); ++k) n = fmt::format("{}_{}", name, k);
    used_.insert(n);
    return n;
  }

  onnx::NodeProto* node(const std::string& op, const std::string& name,
                        const std::vector<std::string>& inputs, const std::string& output) {
    onnx::NodeProto* n = g_->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const std::string& in : inputs) n->add_input(in);
    n->add_output(output);
    return n;
  }

  // A constant of the graph; returns its (unique) name.
  std::string constant(const std::string& name, const std::vector<int64_t>& dims,
                       const std::vector<float>& values) {
    onnx::TensorProto* t = g_->add_initializer();
    t->set_name(unique(name));
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    t->set_raw_data(values.data(), values.size() * sizeof(float));
    return t->name();
  }

  // An int64 constant of the graph (axes, shapes); returns its (unique) name.
  std::string int_constant(const std::string& name, const std::vector<int64_t>& values) {
    onnx::TensorProto* t = g_->add_initializer();
    t->set_name(unique(name));
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t->add_int64_data(v);
    return t->name();
  }

  // A tensor of the model (weight, running statistic), read back from the backend.
  std::string weight(const std::string& name, const Tensor& value) {
    std::vector<float> host(static_cast<size_t>(value.numel()));
    backend_.download(host.data(), value);
    return constant(name, value.shape().dims(), host);
  }

 private:
  onnx::GraphProto* g_;
  Backend& backend_;
  std::set<std::string> used_;
};

void set_ints(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& values) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values) a->add_ints(v);
}

void set_int(onnx::NodeProto* n, const std::string& name, int64_t value) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(value);
}

void set_float(onnx::NodeProto* n, const std::string& name, float value) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(value);
}

// A float tensor value of shape (batch, dims...), the batch dimension left open.
void set_batch_type(onnx::ValueInfoProto* v, const std::string& name, const Shape& sample) {
  v->set_name(name);
  onnx::TypeProto_Tensor* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  t->mutable_shape()->add_dim()->set_dim_param("batch");
  for (int64_t d : sample.dims()) t->mutable_shape()->add_dim()->set_dim_value(d);
}

std::string json_list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t k = 0; k < items.size(); ++k) out += (k ? ", " : "") + json_string(items[k]);
  return out + "]";
}

std::string json_floats(const std::vector<float>& values) {
  std::string out = "[";
  for (size_t k = 0; k < values.size(); ++k) out += fmt::format("{}{}", k ? ", " : "", values[k]);
  return out + "]";
}

// data.normalize per channel, as the Batcher applies it: none is mean 0 and std 1, one value
// serves every channel.
std::vector<float> per_channel(const std::vector<float>& v, int64_t channels, float none) {
  if (v.empty()) return std::vector<float>(static_cast<size_t>(channels), none);
  if (v.size() == 1) return std::vector<float>(static_cast<size_t>(channels), v[0]);
  if (static_cast<int64_t>(v.size()) != channels)
    throw ConfigError(
        fmt::format("data.normalize has {} values for an input of {} channels", v.size(), channels),
        "give one value per channel, or one for all");
  return v;
}

[[noreturn]] void refuse(const Layer& layer, const std::string& why) {
  throw ConfigError("layer " + std::to_string(layer.index() + 1) + " (" + layer.type() + ", " +
                        layer.name() + ") cannot be exported to ONNX: " + why,
                    "export a model of the layers ONNX expresses exactly: conv2d, dense, maxpool, "
                    "avgpool, global_avgpool, the activations, batchnorm, groupnorm, dropout, "
                    "drop_path, flatten, add, multiply, concat");
}

// Pooling's window, stride and padding as ONNX attributes (pads: begin h, begin w, end h, end w,
// the same at both ends as tandem pads), and ceil mode. ONNX's ceil mode keeps a last window that
// would start in the end padding, which tandem (as PyTorch) drops: there the window is written as
// floor mode with the end padding that reaches the last window tandem keeps (less than a window,
// left out of an average's divisor as all padding is).
void set_window(onnx::NodeProto* n, const Layer& layer, const Pool2dParams& p) {
  // ONNX asks each pad to be smaller than its window; tandem's are at most half of it.
  if (p.pad_h >= p.kernel_h || p.pad_w >= p.kernel_w)
    refuse(layer, "its padding is not smaller than its window");
  set_ints(n, "kernel_shape", {p.kernel_h, p.kernel_w});
  set_ints(n, "strides", {p.stride_h, p.stride_w});
  const Shape& in = layer.input_shape();  // (C,H,W)
  const Shape& out = layer.output_shape();
  auto onnx_ceil = [](int64_t size, int k, int s, int pad) {
    return (size + 2 * pad - k + s - 1) / s + 1;
  };
  const bool same = onnx_ceil(in[1], p.kernel_h, p.stride_h, p.pad_h) == out[1] &&
                    onnx_ceil(in[2], p.kernel_w, p.stride_w, p.pad_w) == out[2];
  if (!p.ceil_mode || same) {
    set_ints(n, "pads", {p.pad_h, p.pad_w, p.pad_h, p.pad_w});
    set_int(n, "ceil_mode", p.ceil_mode ? 1 : 0);
    return;
  }
  set_ints(n, "pads",
           {p.pad_h, p.pad_w, pool_end_pad(in[1], out[1], p.kernel_h, p.stride_h, p.pad_h),
            pool_end_pad(in[2], out[2], p.kernel_w, p.stride_w, p.pad_w)});
  set_int(n, "ceil_mode", 0);
}

// The inner nodes of a layer written as a composition of operators: NAME.1, NAME.2, ..., each
// writing a value of its own name; a call adds one and returns its output (and the node, when
// asked, for its attributes).
class InnerNodes {
 public:
  InnerNodes(GraphBuilder& b, const std::string& name) : b_(b), name_(name) {}
  std::string operator()(const std::string& op, const std::vector<std::string>& in,
                         onnx::NodeProto** node = nullptr) {
    const std::string node_name = fmt::format("{}.{}", name_, ++count_);
    const std::string out = b_.unique(node_name);
    onnx::NodeProto* n = b_.node(op, node_name, in, out);
    if (node) *node = n;
    return out;
  }

 private:
  GraphBuilder& b_;
  const std::string& name_;
  int count_ = 0;
};

// An activation as the ONNX operators that compute it (opset 13): its own where ONNX has one,
// else their composition, whose inner nodes are NAME.1, NAME.2, ... and whose last node, NAME,
// writes `output`.
void add_activation(GraphBuilder& b, const ActivationLayer& act, const std::string& x,
                    const std::string& output) {
  const std::string& name = act.name();
  auto scalar = [&](const char* what, float v) {
    return b.constant(fmt::format("{}.{}", name, what), {}, {v});
  };
  InnerNodes mid(b, name);
  auto last = [&](const std::string& op, const std::vector<std::string>& in) {
    return b.node(op, name, in, output);
  };
  // relu6(x + 3) / 6: HardSigmoid with PyTorch's slope and offset (ONNX's default alpha is 0.2).
  auto hard_sigmoid = [&](onnx::NodeProto* n) {
    set_float(n, "alpha", 1.f / 6.f);
    set_float(n, "beta", 0.5f);
  };
  switch (act.kind()) {
    case Activation::kRelu:
      last("Relu", {x});
      break;
    case Activation::kLeakyRelu:
      set_float(last("LeakyRelu", {x}), "alpha", act.alpha());
      break;
    case Activation::kSigmoid:
      last("Sigmoid", {x});
      break;
    case Activation::kTanh:
      last("Tanh", {x});
      break;
    case Activation::kRelu6:
      last("Clip", {x, scalar("min", 0.f), scalar("max", 6.f)});
      break;
    case Activation::kSilu:
      last("Mul", {x, mid("Sigmoid", {x})});
      break;
    case Activation::kHardSigmoid:
      hard_sigmoid(last("HardSigmoid", {x}));
      break;
    case Activation::kHardSwish: {  // x * hardsigmoid(x); ONNX's HardSwish is opset 14
      onnx::NodeProto* h = nullptr;
      const std::string gate = mid("HardSigmoid", {x}, &h);
      hard_sigmoid(h);
      last("Mul", {x, gate});
      break;
    }
    case Activation::kGelu: {  // x * 0.5 * (1 + erf(x / sqrt(2))); ONNX's Gelu is opset 20
      const std::string e = mid("Erf", {mid("Div", {x, scalar("sqrt2", std::sqrt(2.f))})});
      last("Mul", {mid("Mul", {x, mid("Add", {e, scalar("one", 1.f)})}), scalar("half", 0.5f)});
      break;
    }
    case Activation::kGeluTanh: {  // x * 0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
      const std::string cube = mid("Mul", {x, mid("Mul", {x, x})});
      const std::string sum = mid("Add", {x, mid("Mul", {cube, scalar("cubic", 0.044715f)})});
      const std::string t =
          mid("Tanh", {mid("Mul", {sum, scalar("sqrt_2_over_pi", 0.7978845608f)})});
      last("Mul", {mid("Mul", {x, mid("Add", {t, scalar("one", 1.f)})}), scalar("half", 0.5f)});
      break;
    }
    case Activation::kElu:
      set_float(last("Elu", {x}), "alpha", act.alpha());
      break;
    case Activation::kSoftplus:
      last("Softplus", {x});
      break;
    case Activation::kMish:  // x * tanh(softplus(x)); ONNX's Mish is opset 18
      last("Mul", {x, mid("Tanh", {mid("Softplus", {x})})});
      break;
  }
}

// Group normalization as its composition (ONNX's GroupNormalization is opset 18, and scales per
// group, not per channel): x (N,C,...) seen as (N, G, rest), each row's mean and biased variance,
// normalized, seen as x's shape again, then scaled and shifted per channel. `in`: x, weight, bias.
void add_groupnorm(GraphBuilder& b, const GroupNorm& gn, const std::vector<std::string>& in,
                   const std::string& output) {
  const std::string& name = gn.name();
  InnerNodes mid(b, name);
  auto mean_of_rows = [&](const std::string& v) {
    onnx::NodeProto* n = nullptr;
    const std::string out = mid("ReduceMean", {v}, &n);
    set_ints(n, "axes", {2});
    set_int(n, "keepdims", 1);
    return out;
  };
  const Shape& s = gn.input_shape();  // (C,H,W) or (C)
  std::vector<int64_t> back{0};       // Reshape's 0: the batch as it is
  for (int64_t d : s.dims()) back.push_back(d);
  const std::string rows =
      mid("Reshape", {in[0], b.int_constant(name + ".grouped", {0, gn.groups(), -1})});
  const std::string centred = mid("Sub", {rows, mean_of_rows(rows)});
  const std::string var = mean_of_rows(mid("Mul", {centred, centred}));
  const std::string eps = b.constant(name + ".eps", {}, {gn.eps()});
  const std::string normalized = mid("Div", {centred, mid("Sqrt", {mid("Add", {var, eps})})});
  std::string weight = in[1], bias = in[2];
  if (s.rank() == 3) {  // (C) -> (C,1,1), broadcast over the positions
    const std::string axes = b.int_constant(name + ".axes", {1, 2});
    weight = mid("Unsqueeze", {weight, axes});
    bias = mid("Unsqueeze", {bias, axes});
  }
  const std::string scaled =
      mid("Mul", {mid("Reshape", {normalized, b.int_constant(name + ".shape", back)}), weight});
  b.node("Add", name, {scaled, bias}, output);
}

// Adds the nodes of one layer, reading `inputs` and writing `output`.
void add_layer(GraphBuilder& b, Layer& layer, const std::vector<std::string>& inputs,
               const std::string& output) {
  const std::string& type = layer.type();
  const std::string& name = layer.name();
  std::vector<std::string> in = inputs;
  for (const Param& p : layer.params()) in.push_back(b.weight(p.name, p.value));
  if (auto* conv = dynamic_cast<Conv2d*>(&layer); conv && type == "conv2d") {
    // x (N,C,H,W), W (K,C/G,R,S), B (K) -> (N,K,P,Q); tandem's convolution is ONNX's (a
    // cross-correlation), grouped as ONNX's `group`.
    const Conv2dParams& p = conv->conv_params();
    const Shape& w = layer.params()[0].shape;
    onnx::NodeProto* n = b.node("Conv", name, in, output);
    set_ints(n, "kernel_shape", {w[2], w[3]});
    set_ints(n, "strides", {p.stride_h, p.stride_w});
    set_ints(n, "pads", {p.pad_h, p.pad_w, p.pad_h, p.pad_w});
    set_ints(n, "dilations", {p.dilation_h, p.dilation_w});
    set_int(n, "group", p.groups);
  } else if (dynamic_cast<Dense*>(&layer) && type == "dense") {
    // x (N,F) W^T (F,U) + B (U): Gemm with transB, as PyTorch exports its Linear.
    set_int(b.node("Gemm", name, in, output), "transB", 1);
  } else if (auto* pool = dynamic_cast<Pool2d*>(&layer); pool && type == "maxpool") {
    // Padding never wins a window (ONNX pads max pooling with -inf).
    set_window(b.node("MaxPool", name, in, output), layer, pool->pool_params());
  } else if (pool && type == "avgpool") {
    // The divisor counts the window's input values only, as tandem's (count_include_pad 0).
    onnx::NodeProto* n = b.node("AveragePool", name, in, output);
    set_window(n, layer, pool->pool_params());
    set_int(n, "count_include_pad", 0);
  } else if (pool && type == "global_avgpool") {
    const Pool2dParams& p = pool->pool_params();
    const Shape& x = layer.input_shape();
    if (p.kernel_h != x[1] || p.kernel_w != x[2] || p.pad_h || p.pad_w)
      refuse(layer, "its window is not the whole input");
    if (pool->keep_dims()) {
      b.node("GlobalAveragePool", name, in, output);
    } else {  // (N,C,1,1), then (N,C)
      const std::string pooled = b.unique(name + ".pooled");
      b.node("GlobalAveragePool", name + ".pool", in, pooled);
      set_int(b.node("Flatten", name, {pooled}, output), "axis", 1);
    }
  } else if (auto* act = dynamic_cast<ActivationLayer*>(&layer)) {
    add_activation(b, *act, in[0], output);
  } else if (auto* bn = dynamic_cast<BatchNorm*>(&layer); bn && type == "batchnorm") {
    // Inference form: y = scale * (x - running_mean) / sqrt(running_var + eps) + B, per channel
    // (axis 1) of (N,C,H,W) or (N,C).
    for (const auto& [buffer, value] : bn->buffers()) in.push_back(b.weight(buffer, value));
    set_float(b.node("BatchNormalization", name, in, output), "epsilon", bn->eps());
  } else if (auto* gn = dynamic_cast<GroupNorm*>(&layer); gn && type == "groupnorm") {
    add_groupnorm(b, *gn, in, output);
  } else if (type == "dropout" || type == "drop_path") {
    b.node("Identity", name, in, output);  // the identity outside training
  } else if (type == "flatten") {
    set_int(b.node("Flatten", name, in, output), "axis", 1);  // (N, ...) -> (N, features)
  } else if (type == "add") {
    // ((x1 + x2) + x3) + ..., in tandem's order.
    std::string sum = in[0];
    for (size_t k = 1; k < in.size(); ++k) {
      const std::string to = k + 1 == in.size() ? output : b.unique(fmt::format("{}.{}", name, k));
      b.node("Add", k + 1 == in.size() ? name : fmt::format("{}.{}", name, k), {sum, in[k]}, to);
      sum = to;
    }
  } else if (auto* mul = dynamic_cast<Multiply*>(&layer); mul && type == "multiply") {
    // Mul broadcasts numpy's way, from the last axis: a (N,C) gate of a (N,C,H,W) input becomes
    // (N,C,1,1) first.
    std::string gate = in[mul->gate()];
    const std::string& x = in[1 - mul->gate()];
    if (mul->gate_shape().rank() == 1 && layer.output_shape().rank() == 3) {
      const std::string to = b.unique(name + ".gate");
      b.node("Unsqueeze", name + ".gate", {gate, b.int_constant(name + ".axes", {2, 3})}, to);
      gate = to;
    }
    b.node("Mul", name, {x, gate}, output);
  } else if (type == "concat") {
    set_int(b.node("Concat", name, in, output), "axis", 1);  // channels, or features
  } else {
    refuse(layer, "export knows no ONNX form of the layer type '" + type + "'");
  }
}

}  // namespace

std::string onnx_model_bytes(Graph& graph, Backend& backend, const Config& config,
                             const CheckpointMeta& meta, const OnnxExportOptions& options) {
  TANDEM_CHECK(options.opset >= kOnnxMinOpset && options.opset <= kOnnxMaxOpset,
               "opset " + std::to_string(options.opset));
  onnx::ModelProto model;
  model.set_ir_version(kOnnxIrVersion);
  onnx::OperatorSetIdProto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(options.opset);
  model.set_producer_name("tandem");
  model.set_producer_version(TANDEM_VERSION);
  onnx::GraphProto* g = model.mutable_graph();
  g->set_name(config.name.empty() ? "tandem" : config.name);
  GraphBuilder b(g, backend);

  const Shape& shape = graph.input_shape();
  const int64_t channels = shape.rank() == 3 ? shape[0] : 1;
  const std::vector<float> mean = per_channel(config.data.mean, channels, 0.f);
  const std::vector<float> std = per_channel(config.data.std, channels, 1.f);
  const std::string pixels = "pixel values scaled to [0,1] (8-bit value / 255)";
  const std::string normalized = "(" + pixels + " - mean) / std per channel, mean " +
                                 json_floats(mean) + ", std " + json_floats(std) +
                                 " (metadata normalize_mean, normalize_std)";

  // The input as the first layer takes it: normalized here unless the graph does it.
  onnx::ValueInfoProto* input = g->add_input();
  set_batch_type(input, b.unique("input"), shape);
  input->set_doc_string(options.fold_normalization ? pixels : normalized);
  std::string x = input->name();
  if (options.fold_normalization && !(config.data.mean.empty() && config.data.std.empty())) {
    // (x - mean) / std with mean and std (1,C,1,1) (or (1) for a flat input), broadcast.
    const std::vector<int64_t> dims =
        shape.rank() == 3 ? std::vector<int64_t>{1, channels, 1, 1} : std::vector<int64_t>{1};
    const std::string centred = b.unique("input.centred"), scaled = b.unique("input.normalized");
    b.node("Sub", "normalize.mean", {x, b.constant("normalize.mean", dims, mean)}, centred);
    b.node("Div", "normalize.std", {centred, b.constant("normalize.std", dims, std)}, scaled);
    x = scaled;
  }

  // Each layer's output is named after the layer; the last one's is the model's.
  const std::vector<std::unique_ptr<Layer>>& layers = graph.layers();
  const std::vector<SummaryRow> rows = graph.summary();
  std::map<std::string, std::string> value_of{{"input", x}};  // tandem name -> ONNX value
  const std::string logits = b.unique("logits");
  const std::string probabilities = options.softmax ? b.unique("probabilities") : "";
  std::string previous = x;
  for (size_t i = 0; i < layers.size(); ++i) {
    std::vector<std::string> inputs;
    for (const std::string& from : rows[i].inputs) inputs.push_back(value_of.at(from));
    if (inputs.empty()) inputs.push_back(previous);
    const std::string out = i + 1 == layers.size() ? logits : b.unique(layers[i]->name());
    add_layer(b, *layers[i], inputs, out);
    value_of[layers[i]->name()] = previous = out;
  }
  const Shape classes{graph.classes()};
  if (options.softmax) {
    // Over the classes (axis 1 of (N, classes)).
    set_int(b.node("Softmax", "softmax", {logits}, probabilities), "axis", 1);
  }
  onnx::ValueInfoProto* output = g->add_output();
  set_batch_type(output, options.softmax ? probabilities : logits, classes);
  output->set_doc_string(options.softmax ? "class probabilities (softmax of the logits)"
                                         : "class scores (logits), one per class");

  // What a runtime needs beside the graph: the classes by index and the input's normalization.
  std::vector<std::string> names = meta.class_names;
  for (int64_t c = static_cast<int64_t>(names.size()); c < graph.classes(); ++c)
    names.push_back(std::to_string(c));
  auto property = [&](const std::string& key, const std::string& value) {
    onnx::StringStringEntryProto* e = model.add_metadata_props();
    e->set_key(key);
    e->set_value(value);
  };
  property("class_names", json_list(names));
  property("normalize_mean", json_floats(mean));
  property("normalize_std", json_floats(std));
  property("normalization", options.fold_normalization ? "in_graph" : "before_input");
  property("input", options.fold_normalization ? pixels : normalized);
  property("output", options.softmax ? "probabilities" : "logits");
  model.set_doc_string(fmt::format(
      "{} trained by tandem {} on {}: epoch {}, step {}; input {}", config.name,
      meta.version.empty() ? TANDEM_VERSION : meta.version, meta.device.empty() ? "?" : meta.device,
      meta.epoch, meta.step, options.fold_normalization ? pixels : normalized));

  // The library's own checks: a file they refuse is a bug here, never written.
  try {
    onnx::checker::check_model(model);
    onnx::ModelProto inferred = model;
    onnx::shape_inference::InferShapes(inferred, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions(true, 1));
  } catch (const std::exception& e) {
    throw Error(
        std::string("internal error: the ONNX checker refused the exported model: ") + e.what(),
        "please report this with the model's config");
  }
  std::string bytes;
  TANDEM_CHECK(model.SerializeToString(&bytes), "serializing the ONNX model");
  return bytes;
}

namespace {

// Where the file is written before it is renamed into place: beside it, of this process.
std::string temporary_name(const std::string& path) {
  return path + ".tmp." + std::to_string(::getpid());
}

// Refuses an --onnx path that cannot take the file before the checkpoint is read: an existing
// file (without --force), a folder, a missing or unwritable folder.
void check_output_path(const RunRequest& r) {
  const fs::path out(r.onnx_path);
  std::error_code ec;
  const fs::file_status st = fs::status(out, ec);
  if (fs::is_directory(st))
    throw UsageError("--onnx '" + r.onnx_path + "' is a folder",
                     "give a file name, e.g. --onnx " + (out / "model.onnx").string());
  if (fs::exists(st) && !r.force)
    throw UsageError("'" + r.onnx_path + "' already exists",
                     "pass --force to overwrite it, or give another --onnx path");
  const fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
  const fs::file_status pst = fs::status(parent, ec);
  if (!fs::exists(pst))
    throw UsageError(
        "--onnx '" + r.onnx_path + "': the folder '" + parent.string() + "' does not exist",
        "create it first, or give a path in an existing folder");
  if (!fs::is_directory(pst))
    throw UsageError("--onnx '" + r.onnx_path + "': '" + parent.string() + "' is not a folder",
                     "give a path in a writable folder");
  // A file created and removed again: permissions (root passes any access() check), read-only
  // and special file systems alike.
  const std::string probe = temporary_name(r.onnx_path);
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0)
    throw UsageError("--onnx '" + r.onnx_path + "': cannot write in the folder '" +
                         parent.string() + "' (" + std::strerror(errno) + ")",
                     "give a path in a writable folder");
  ::close(fd);
  ::unlink(probe.c_str());
}

// Writes the model whole or not at all (replace_file): a failed write leaves no half-written
// model, and an old file stays whole until the new one is complete.
void write_file(const std::string& path, const std::string& bytes) {
  const std::string failed = replace_file_with(path, bytes);
  if (!failed.empty())
    throw UsageError("cannot write '" + path + "': " + failed,
                     "check that the folder is writable and the disk is not full");
}

}  // namespace

int run_export(const RunRequest& r) {
  if (r.onnx_path.empty())
    throw UsageError("export needs --onnx FILE",
                     "e.g. trainer export --checkpoint runs/lenet --onnx lenet.onnx");
  if (r.opset < kOnnxMinOpset || r.opset > kOnnxMaxOpset)
    throw UsageError(fmt::format("--opset {} is not supported: export writes ONNX opsets {} to {}",
                                 r.opset, kOnnxMinOpset, kOnnxMaxOpset),
                     fmt::format("leave --opset out for {}, which every ONNX Runtime since 1.8 "
                                 "reads, or give {} to {}",
                                 kOnnxDefaultOpset, kOnnxMinOpset, kOnnxMaxOpset));
  check_output_path(r);
  // One sample of activations is enough: only the weights are read.
  CheckpointModel m = load_checkpoint_model(r, "export", 1);
  if (r.softmax && m.config.loss != "softmax_cross_entropy")
    throw UsageError(
        "--softmax turns logits into probabilities, but this model was trained with "
        "the " +
            m.config.loss + " loss, whose outputs are not logits",
        "leave out --softmax");
  OnnxExportOptions options;
  options.opset = r.opset;
  options.softmax = r.softmax;
  options.fold_normalization = r.fold_normalization;
  const std::string bytes = onnx_model_bytes(*m.graph, *m.backend, m.config, m.meta, options);
  write_file(r.onnx_path, bytes);

  const Shape& in = m.graph->input_shape();
  std::string dims;
  for (int64_t d : in.dims()) dims += fmt::format(", {}", d);
  const bool normalizes = !(m.config.data.mean.empty() && m.config.data.std.empty());
  fmt::print("{}: ONNX opset {} (IR version {}), {} layers, {} parameters, {}\n", r.onnx_path,
             r.opset, kOnnxIrVersion, m.graph->layers().size(),
             format_count(static_cast<double>(m.graph->parameter_count())),
             format_bytes(bytes.size()));
  fmt::print(
      "  input  \"input\" (batch{}): {}\n", dims,
      r.fold_normalization || !normalizes
          ? "pixel values in [0,1]" + std::string(normalizes ? ", normalized in the graph" : "")
          : "(pixel values in [0,1] - mean) / std, as in the metadata");
  fmt::print("  output \"{}\" (batch, {})\n", r.softmax ? "probabilities" : "logits",
             m.graph->classes());
  return 0;
}

}  // namespace tandem
