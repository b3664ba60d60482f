// Graph construction (shape checks, default initialisation), placement, forward and backward.
#include "engine/graph.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>

#include "engine/error.h"
#include "engine/layer_registry.h"
#include "engine/rng.h"

namespace tandem {

namespace {

std::string shapes_str(const std::vector<Shape>& shapes) {
  std::string out;
  for (const Shape& s : shapes) out += (out.empty() ? "" : " and ") + s.str();
  return out;
}

// "layer 3 (conv2d)", or "layer 3 (conv2d, stem)" for a layer given a name.
std::string layer_label(const LayerSpec& spec) {
  return "layer " + std::to_string(spec.index + 1) + " (" + spec.type +
         (spec.name.empty() ? "" : ", " + spec.name) + ")";
}

}  // namespace

Graph::Graph(Config& config)
    : precision_(parse_precision(config.precision)), input_shape_(config.input) {
  const size_t count = config.layers.size();
  const std::vector<std::string> names = layer_names(config.layers);
  for (const LayerSpec& spec : config.layers) named_.push_back(!spec.name.empty());
  std::map<std::string, int> named{{"input", 0}};  // name -> activation
  std::vector<std::string> order{"input"};         // the names, as listed
  std::vector<std::vector<size_t>> takers(count + 1);
  inputs_.assign(count, {});
  for (size_t i = 0; i < count; ++i) {
    LayerSpec& spec = config.layers[i];
    std::unique_ptr<Layer> layer = make_layer(spec);
    layer->set_index(spec.index);
    const std::string& name = names[i];
    if (spec.name.empty() && spec.inputs.empty()) {
      inputs_[i] = {static_cast<int>(i)};
    } else {
      for (const std::string& in : spec.inputs) {
        auto it = named.find(in);
        if (it == named.end()) {
          const bool later =
              std::find(names.begin() + static_cast<long>(i), names.end(), in) != names.end();
          throw ConfigError(
              spec.inputs_where + ": " + layer_label(spec) + " takes '" + in + "', " +
                  (later ? "a layer listed after it" : "which is no earlier layer's name"),
              later ? "list layers so that each comes after the layers it takes"
                    : "inputs name earlier layers: " + fmt::format("{}", fmt::join(order, ", ")) +
                          " (a layer is called by its 'name:', else type_k for the k-th unnamed "
                          "one of its "
                          "type)");
        }
        inputs_[i].push_back(it->second);
      }
      if (spec.inputs.empty()) inputs_[i] = {static_cast<int>(i)};
      if (inputs_[i] != std::vector<int>{static_cast<int>(i)}) branches_ = true;
    }
    if (named.count(name))
      throw ConfigError(spec.where + ": " + layer_label(spec) + " is called '" + name +
                            "', a name " +
                            (name == "input" ? std::string("kept for the model's input")
                                             : "an earlier layer already has"),
                        "give it another 'name:'");
    named[name] = static_cast<int>(i + 1);
    order.push_back(name);
    const bool several = layer->takes_several_inputs();
    if (several != (inputs_[i].size() > 1))
      throw ConfigError(
          (spec.inputs_where.empty() ? spec.where : spec.inputs_where) + ": " + layer_label(spec) +
              (several ? " takes two or more inputs, got " + std::to_string(inputs_[i].size())
                       : " takes one input, got " + std::to_string(inputs_[i].size())),
          several ? "name them with 'inputs: [a, b]'"
                  : "combine branches with an add or concat layer first");
    for (int a : inputs_[i]) takers[static_cast<size_t>(a)].push_back(i);
    layer->set_name(name);
    layers_.push_back(std::move(layer));
  }
  for (size_t i = 0; i + 1 < count; ++i)
    if (takers[i + 1].empty())
      throw ConfigError(config.layers[i].where + ": the output of layer " +
                            std::to_string(config.layers[i].index + 1) + " (" +
                            config.layers[i].type + ", " + names[i] + ")" +
                            " is taken by no later layer (the model's output is the last layer's)",
                        "name it in a later layer's 'inputs:', or remove it");
  consumers_.assign(count + 1, 0);
  only_taker_.assign(count + 1, -1);
  for (size_t k = 0; k <= count; ++k) {
    consumers_[k] = static_cast<int>(takers[k].size());
    if (takers[k].size() == 1) only_taker_[k] = static_cast<int>(takers[k].front());
  }
  for (size_t i = 0; i < count; ++i)
    layers_[i]->choose_init(takers[i + 1].empty() ? "" : layers_[takers[i + 1].front()]->type());

  std::vector<Shape> shapes{input_shape_};
  for (size_t i = 0; i < count; ++i) {
    const LayerSpec& spec = config.layers[i];
    std::vector<Shape> in;
    for (int a : inputs_[i]) in.push_back(shapes[static_cast<size_t>(a)]);
    try {
      shapes.push_back(layers_[i]->setup_inputs(in));
    } catch (const ConfigError& e) {
      // [28, 28, 1], Keras' habit of channels last, fails at some layer as a window larger than
      // its input: the cause is the input shape, and the fix its other order.
      const Shape& x = input_shape_;
      if (x.rank() == 3 && (x[2] == 1 || x[2] == 3 || x[2] == 4) && x[0] > 4 && x[1] > 4)
        throw ConfigError(
            fmt::format("{}: input: {{shape: {}}} looks channels-last (Keras' [H, W, C]); tandem "
                        "takes [C, H, W], so the model reads {} channels of {}x{}, and {} "
                        "fails: {}",
                        config.file, x.str(), x[0], x[1], x[2], layer_label(spec), e.cause()),
            fmt::format("write 'input: {{shape: [{}, {}, {}]}}'", x[2], x[0], x[1]));
      throw ConfigError(spec.where + ": " + layer_label(spec) +
                            (in.size() > 1 ? ", inputs " : ", input ") + shapes_str(in) + ": " +
                            e.cause(),
                        e.hint());
    }
  }
  set_trainable(config);
  // An activation's gradient is needed where some layer at or below it has parameters to train:
  // nothing below a frozen start of the model computes a gradient, its input's or its weights'.
  needs_grad_.assign(count + 1, false);
  for (size_t i = 0; i < count; ++i) {
    bool needs = !layers_[i]->params().empty() && layers_[i]->trainable();
    for (int a : inputs_[i]) needs = needs || needs_grad_[static_cast<size_t>(a)];
    needs_grad_[i + 1] = needs;
  }
  const Shape& shape = shapes.back();
  if (shape.rank() != 1) {
    throw ConfigError(
        config.file + ": the model's output must be flat (classes), got " + shape.str(),
        "end the model with '- flatten' and '- dense: {units: CLASSES}'");
  }
  classes_ = shape[0];
  if (classes_ < 2)
    throw ConfigError(config.file + ": the model's last layer has " + std::to_string(classes_) +
                          " output, a classifier needs at least 2",
                      "set the last dense layer's units to the number of classes");
}

void Graph::set_trainable(const Config& config) {
  bool any = false, trains = false;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const LayerSpec& spec = config.layers[i];
    Layer& layer = *layers_[i];
    const std::string label =
        "layer " + std::to_string(spec.index + 1) + " (" + spec.type + ", " + layer.name() + ")";
    if (layer.params().empty()) {
      // Named itself (not as one of a block's layers or of up_to's), it was meant to matter.
      if (!spec.frozen_where.empty())
        throw ConfigError(spec.frozen_where + ": " + label + " has no parameters to freeze",
                          "freeze layers with weights (conv2d, dense, batchnorm, groupnorm); "
                          "a layer without any has nothing to keep");
      if (!spec.lr_mult_where.empty())
        throw ConfigError(spec.lr_mult_where + ": train.optimizer.lr_multipliers: " + label +
                              " has no parameters to update",
                          "give the multiplier to a layer with weights (conv2d, dense, "
                          "batchnorm, groupnorm)");
      continue;
    }
    layer.set_trainable(!spec.frozen);
    for (Param& p : layer.params()) {
      p.trainable = !spec.frozen;
      p.lr_mult = spec.lr_mult;
    }
    any = true;
    trains = trains || !spec.frozen;
  }
  if (any && !trains)
    throw ConfigError(config.file +
                          ": every layer with parameters is frozen (train.freeze, 'trainable: "
                          "false'): nothing would train",
                      "leave at least the model's last layers trainable, e.g. 'freeze: {up_to: "
                      "NAME}' with NAME a layer before the head");
}

std::vector<float> Graph::initial_values(const Param& p, uint64_t seed, uint64_t stream) {
  const int64_t n = p.shape.numel();
  std::vector<float> v(static_cast<size_t>(n), 0.f);
  const double fan_in = static_cast<double>(p.fan_in), fan_out = static_cast<double>(p.fan_out);
  double bound = 0, sigma = 0;
  switch (p.init) {
    case Init::kZeros:
      return v;
    case Init::kOnes:
      std::fill(v.begin(), v.end(), 1.f);
      return v;
    case Init::kHeNormal:
      sigma = std::sqrt(2.0 / fan_in);
      break;
    case Init::kGlorotNormal:
      sigma = std::sqrt(2.0 / (fan_in + fan_out));
      break;
    case Init::kHeUniform:
      bound = std::sqrt(6.0 / fan_in);
      break;
    case Init::kGlorotUniform:
      bound = std::sqrt(6.0 / (fan_in + fan_out));
      break;
    case Init::kPytorch:
      bound = 1.0 / std::sqrt(fan_in);
      break;
  }
  for (int64_t i = 0; i < n; ++i) {
    double x = sigma > 0
                   ? sigma * philox_normal(seed, stream, static_cast<uint64_t>(i))
                   : bound * (2.0 * philox_uniform(seed, stream, static_cast<uint64_t>(i)) - 1.0);
    v[static_cast<size_t>(i)] = static_cast<float>(x);
  }
  return v;
}

namespace {

// What to train in instead where a backend has no kernels for a 16-bit precision.
std::string precision_hint(Precision p, bool cpu) {
  // A GPU is offered by trainer devices, which says whether this machine has one that runs.
  if (cpu)
    return p == Precision::kF16
               ? "use --precision bf16 or fp32 on the CPU (fp16 runs on GPUs: trainer devices "
                 "says what this machine has)"
               : "use --precision fp32 here (bf16 runs on CPUs with AVX512-BF16 and on GPUs: "
                 "trainer devices says what this machine has)";
  return p == Precision::kBF16 ? "use --precision fp16 or fp32 on this GPU (trainer devices "
                                 "says which precisions it runs natively)"
                               : "use --precision fp32 on this GPU";
}

}  // namespace

void Graph::allocate(Backend& backend, int64_t max_batch, uint64_t seed) {
  max_batch_ = max_batch;
  if (std::string why; !backend.supports_dtype(activation_dtype(precision_), &why))
    throw DeviceError("precision " + std::string(precision_name(precision_)) + " on " +
                          backend.name() + ": " + why,
                      precision_hint(precision_, backend.name() == "cpu"));
  int64_t packed = 0;
  for (Param* p : params()) packed += packed_numel(p->shape);
  Tensor values(backend, Shape{packed}), grads(backend, Shape{packed});
  backend.fill(values, 0.f);
  backend.fill(grads, 0.f);
  packed_values_ = values;
  packed_grads_ = grads;
  uint64_t stream = 1;
  int64_t offset = 0;
  for (auto& layer : layers_) {
    for (Param& p : layer->params()) {
      p.value = values.view(offset, p.shape);
      p.grad = grads.view(offset, p.shape);
      offset += packed_numel(p.shape);
      std::vector<float> init = initial_values(p, seed, stream++);
      backend.upload(p.value, init.data());
    }
    layer->allocate(backend, max_batch);
  }
  const size_t count = layers_.size();
  acts_.assign(count + 1, Tensor());
  grads_.assign(count + 1, Tensor());
  acts_[0] = Tensor(backend, input_shape_.with_batch(max_batch));
  // Activation k's dtype and layout (see allocate's comment in graph.h).
  const DType low = activation_dtype(precision_);
  auto dtype_of = [&](size_t k) { return k == 0 || k == count ? DType::kF32 : low; };
  auto layout_of = [&](size_t k, const Shape& s) {
    return k == 0 || k == count ? Layout::kPlain : backend.activation_layout(dtype_of(k), s);
  };
  choose_fusions(backend, dtype_of);
  views_.assign(count, false);
  for (size_t i = 0; i < count; ++i) {
    Shape out = layers_[i]->output_shape().with_batch(max_batch);
    const Tensor& in = act(inputs_[i][0]);
    views_[i] =
        layers_[i]->is_view() && in.layout() == Layout::kPlain && in.dtype() == dtype_of(i + 1);
    if (views_[i]) {
      acts_[i + 1] = in.reshape(out);
    } else if (fused_into_[i] >= 0) {  // the relu's output is its producer's
      acts_[i + 1] = in;
    } else {
      acts_[i + 1] = Tensor(backend, out, dtype_of(i + 1), layout_of(i + 1, out));
    }
  }
  // Gradient buffers, from the top down: an activation taken only by a view layer shares that
  // layer's output gradient's storage.
  shares_grad_.assign(count, false);
  int64_t scratch = 0;
  for (size_t k = count; k >= 1; --k) {
    const Shape& shape = acts_[k].shape();
    const int j = only_taker_[k];
    if (j >= 0 && views_[static_cast<size_t>(j)]) {
      grads_[k] = grads_[static_cast<size_t>(j) + 1].reshape(shape);
      shares_grad_[static_cast<size_t>(j)] = true;
    } else if (j >= 0 && fused_into_[static_cast<size_t>(j)] >= 0) {
      grads_[k] = grads_[static_cast<size_t>(j) + 1];  // a fused relu's, as its output
    } else {
      grads_[k] = Tensor(backend, shape, acts_[k].dtype(), acts_[k].layout());
    }
    if (consumers_[k] > 1 && needs_grad_[k]) scratch = std::max(scratch, shape.numel());
  }
  size_t slots = 0;
  for (const auto& in : inputs_) slots = std::max(slots, in.size());
  scratch_.clear();
  if (scratch > 0)
    for (size_t s = 0; s < slots; ++s) scratch_.emplace_back(backend, Shape{scratch}, low);
}

void Graph::choose_fusions(const Backend& backend, const std::function<DType(size_t)>& dtype_of) {
  const size_t count = layers_.size();
  fused_into_.assign(count, -1);
  for (auto& layer : layers_) {
    layer->fuse_relu(false);
    layer->take_relu_before(false);
  }
  if (const char* v = std::getenv("TANDEM_FUSION"); v && std::string(v) == "off") return;
  for (size_t j = 0; j < count; ++j) {
    if (layers_[j]->type() != "relu" || inputs_[j].size() != 1) continue;
    // The relu alone takes its input, an inner activation of its own dtype (not the input, whose
    // buffer swap_input() replaces; not a last relu giving fp32 logits): the relu's output and
    // gradient can then be its input's buffers.
    const int a = inputs_[j][0];
    if (a == 0 || consumers_[static_cast<size_t>(a)] != 1 ||
        dtype_of(static_cast<size_t>(a)) != dtype_of(j + 1))
      continue;
    const DType d = dtype_of(j + 1);
    const size_t p = static_cast<size_t>(a) - 1;  // its input's layer: it may compute the relu
    if (!layers_[p]->fused_relu() && layers_[p]->can_fuse_relu(backend, d)) {
      layers_[p]->fuse_relu(true);
      fused_into_[j] = static_cast<int>(p);
      continue;
    }
    const int k = only_taker_[j + 1];  // or the one layer that takes the relu's output
    if (k >= 0 && inputs_[static_cast<size_t>(k)].size() == 1 &&
        !layers_[static_cast<size_t>(k)]->relu_before() &&
        layers_[static_cast<size_t>(k)]->can_take_relu_before(backend, d)) {
      layers_[static_cast<size_t>(k)]->take_relu_before(true);
      fused_into_[j] = k;
    }
  }
}

void Graph::swap_input(Tensor& other) {
  TANDEM_CHECK(other.shape() == acts_.front().shape(), "input buffer " + other.shape().str());
  std::swap(acts_.front(), other);
  // View layers (a first flatten) of the input read its storage under another shape.
  for (size_t i = 0; i < layers_.size(); ++i)
    if (views_[i]) acts_[i + 1] = act(inputs_[i][0]).reshape(acts_[i + 1].shape());
}

Tensor Graph::forward(Context& ctx, int64_t n) {
  TANDEM_CHECK(n > 0 && n <= max_batch_, "batch of " + std::to_string(n) + " samples");
  std::vector<Tensor> xs;
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (views_[i] || fused_into_[i] >= 0) continue;
    xs.clear();
    for (int a : inputs_[i]) xs.push_back(act(a).prefix(n));
    Tensor y = acts_[i + 1].prefix(n);
    if (hook_) hook_(i, false, false);
    if (layers_[i]->is_view()) {
      ctx.backend.copy(y, xs[0]);  // a flatten that converts (see views_)
    } else {
      layers_[i]->forward_inputs(ctx, xs, y);
    }
    if (hook_) hook_(i, false, true);
  }
  return acts_.back().prefix(n);
}

void Graph::backward(Context& ctx, const Tensor& dlogits) {
  const int64_t n = dlogits.dim(0);
  Tensor top = grads_.back().prefix(n);
  if (top.data() != dlogits.data()) ctx.backend.copy(top, dlogits);
  // The first gradient reaching an activation is written into its buffer, the others into a
  // scratch buffer and added (takers run in reverse order, after every layer above them).
  std::vector<bool> written(acts_.size(), false);
  written.back() = true;
  std::vector<Tensor> xs, dx;
  std::vector<Tensor*> dxs;
  auto target = [&](int a, size_t slot) -> Tensor {
    if (!written[static_cast<size_t>(a)]) {
      written[static_cast<size_t>(a)] = true;
      return grads_[static_cast<size_t>(a)].prefix(n);
    }
    const Tensor& g = grads_[static_cast<size_t>(a)];
    return scratch_.at(slot).view(0, g.shape()).with_layout(g.layout()).prefix(n);
  };
  auto accumulate = [&](int a, Tensor& d) {
    Tensor g = grads_[static_cast<size_t>(a)].prefix(n);
    if (d.data() != g.data()) ctx.backend.add(g, g, d);
  };
  for (size_t i = layers_.size(); i-- > 0;) {
    if (!needs_grad_[i + 1]) continue;
    Layer& layer = *layers_[i];
    const std::vector<int>& in = inputs_[i];
    if (fused_into_[i] >= 0) {  // its producer's backward takes the gradient, in the same buffer
      written[static_cast<size_t>(in[0])] = true;
      continue;
    }
    Tensor y = acts_[i + 1].prefix(n), dy = grads_[i + 1].prefix(n);
    if (layer.is_view()) {  // dx is dy reshaped: shared storage, or copied (and converted)
      const int a = in[0];
      if (shares_grad_[i]) {
        written[static_cast<size_t>(a)] = true;
      } else if (needs_grad_[static_cast<size_t>(a)]) {
        Tensor d = target(a, 0);
        if (hook_) hook_(i, true, false);
        ctx.backend.copy(d, dy);
        if (hook_) hook_(i, true, true);
        accumulate(a, d);
      }
      continue;
    }
    xs.clear();
    dx.assign(in.size(), Tensor());
    dxs.assign(in.size(), nullptr);
    for (size_t s = 0; s < in.size(); ++s) {
      xs.push_back(act(in[s]).prefix(n));
      if (!needs_grad_[static_cast<size_t>(in[s])]) continue;
      dx[s] = target(in[s], s);
      dxs[s] = &dx[s];
    }
    if (hook_) hook_(i, true, false);
    layer.backward_inputs(ctx, xs, y, dy, dxs);
    for (size_t s = 0; s < in.size(); ++s)
      if (dxs[s]) accumulate(in[s], dx[s]);
    if (hook_) hook_(i, true, true);
  }
}

Tensor Graph::input_gradient(size_t layer, int64_t n) const {
  const auto a = static_cast<size_t>(inputs_[layer][0]);
  return needs_grad_[a] ? grads_[a].prefix(n) : Tensor();
}

std::vector<Param*> Graph::params() {
  std::vector<Param*> out;
  for (auto& layer : layers_)
    for (Param& p : layer->params()) out.push_back(&p);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Graph::buffers(bool moving_only) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& layer : layers_)
    if (!moving_only || layer->trainable())
      for (auto& b : layer->buffers()) out.push_back(std::move(b));
  return out;
}

std::vector<std::pair<std::string, Shape>> Graph::tensor_shapes() const {
  std::vector<std::pair<std::string, Shape>> out;
  for (const auto& layer : layers_)
    for (const Param& p : layer->params()) out.emplace_back(p.name, p.shape);
  for (const auto& layer : layers_)
    for (auto& b : layer->buffer_shapes()) out.push_back(std::move(b));
  return out;
}

int64_t Graph::min_training_batch() const {
  int64_t n = 1;
  for (const auto& layer : layers_) n = std::max(n, layer->min_training_batch());
  return n;
}

std::vector<SummaryRow> Graph::summary() const {
  std::vector<SummaryRow> rows;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& layer = *layers_[i];
    int64_t params = 0;
    for (const Param& p : layer.params()) params += p.shape.numel();
    std::vector<std::string> inputs;
    if (branches_)
      for (int a : inputs_[i])
        inputs.push_back(a == 0 ? "input" : layers_[static_cast<size_t>(a) - 1]->name());
    rows.push_back({layer.index() + 1, layer.name(), layer.type(), layer.output_shape(), params,
                    layer.flops(), std::move(inputs), layer.buffer_count(), named_[i],
                    params > 0 && !layer.trainable(),
                    layer.params().empty() ? 1.0 : layer.params()[0].lr_mult});
  }
  return rows;
}

int64_t Graph::parameter_count() const {
  int64_t n = 0;
  for (const auto& r : summary()) n += r.params;
  return n;
}

int64_t Graph::frozen_parameter_count() const {
  int64_t n = 0;
  for (const auto& r : summary())
    if (r.frozen) n += r.params;
  return n;
}

int64_t Graph::forward_flops() const {
  int64_t n = 0;
  for (const auto& layer : layers_) n += layer->flops();
  return n;
}

}  // namespace tandem
