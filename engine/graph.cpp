// Graph construction (shape checks, default initialisation), placement, forward and backward.
#include "engine/graph.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "engine/error.h"
#include "engine/layer_registry.h"
#include "engine/rng.h"

namespace tandem {

Graph::Graph(Config& config) : input_shape_(config.input) {
  std::map<std::string, int> counts;
  for (LayerSpec& spec : config.layers) {
    std::unique_ptr<Layer> layer = make_layer(spec);
    layer->set_index(spec.index);
    layer->set_name(spec.type + "_" + std::to_string(++counts[spec.type]));
    layers_.push_back(std::move(layer));
  }
  for (size_t i = 0; i < layers_.size(); ++i)
    layers_[i]->choose_init(i + 1 < layers_.size() ? layers_[i + 1]->type() : "");
  Shape shape = input_shape_;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const LayerSpec& spec = config.layers[i];
    try {
      shape = layers_[i]->setup(shape);
    } catch (const ConfigError& e) {
      throw ConfigError(spec.where + ": layer " + std::to_string(spec.index + 1) + " (" +
                            spec.type + "), input " + shape.str() + ": " + e.cause(),
                        e.hint());
    }
  }
  if (shape.rank() != 1) {
    throw ConfigError(config.file + ": the model's output must be flat (classes), got " +
                          shape.str(),
                      "end the model with '- flatten' and '- dense: {units: CLASSES}'");
  }
  classes_ = shape[0];
  if (classes_ < 2)
    throw ConfigError(config.file + ": the model's last layer has " + std::to_string(classes_) +
                          " output, a classifier needs at least 2",
                      "set the last dense layer's units to the number of classes");
}

std::vector<float> Graph::initial_values(const Param& p, uint64_t seed, uint64_t stream) {
  const int64_t n = p.shape.numel();
  std::vector<float> v(static_cast<size_t>(n), 0.f);
  const double fan_in = static_cast<double>(p.fan_in), fan_out = static_cast<double>(p.fan_out);
  double bound = 0, sigma = 0;
  switch (p.init) {
    case Init::kZeros: return v;
    case Init::kOnes: std::fill(v.begin(), v.end(), 1.f); return v;
    case Init::kHeNormal: sigma = std::sqrt(2.0 / fan_in); break;
    case Init::kGlorotNormal: sigma = std::sqrt(2.0 / (fan_in + fan_out)); break;
    case Init::kHeUniform: bound = std::sqrt(6.0 / fan_in); break;
    case Init::kGlorotUniform: bound = std::sqrt(6.0 / (fan_in + fan_out)); break;
    case Init::kPytorch: bound = 1.0 / std::sqrt(fan_in); break;
  }
  for (int64_t i = 0; i < n; ++i) {
    double x = sigma > 0 ? sigma * philox_normal(seed, stream, static_cast<uint64_t>(i))
                         : bound * (2.0 * philox_uniform(seed, stream, static_cast<uint64_t>(i)) - 1.0);
    v[static_cast<size_t>(i)] = static_cast<float>(x);
  }
  return v;
}

void Graph::allocate(Backend& backend, int64_t max_batch, uint64_t seed) {
  max_batch_ = max_batch;
  int64_t packed = 0;
  for (Param* p : params()) packed += packed_numel(p->shape);
  Tensor values(backend, Shape{packed}), grads(backend, Shape{packed});
  backend.fill(values, 0.f);
  backend.fill(grads, 0.f);
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
  acts_.assign(layers_.size() + 1, Tensor());
  grads_.assign(layers_.size() + 1, Tensor());
  acts_[0] = Tensor(backend, input_shape_.with_batch(max_batch));
  for (size_t i = 0; i < layers_.size(); ++i) {
    Shape out = layers_[i]->output_shape().with_batch(max_batch);
    if (layers_[i]->is_view()) {
      acts_[i + 1] = acts_[i].reshape(out);
    } else {
      acts_[i + 1] = Tensor(backend, out);
    }
  }
  // Gradient buffers, from the top down; view layers share their output gradient's storage.
  for (size_t i = layers_.size(); i >= 1; --i) {
    Shape shape = acts_[i].shape();
    if (i < layers_.size() && layers_[i]->is_view())
      grads_[i] = grads_[i + 1].reshape(shape);
    else
      grads_[i] = Tensor(backend, shape);
  }
}

void Graph::swap_input(Tensor& other) {
  TANDEM_CHECK(other.shape() == acts_.front().shape(), "input buffer " + other.shape().str());
  std::swap(acts_.front(), other);
  // Leading view layers (a first flatten) read the input's storage under another shape.
  for (size_t i = 0; i < layers_.size() && layers_[i]->is_view(); ++i)
    acts_[i + 1] = acts_[i].reshape(acts_[i + 1].shape());
}

Tensor Graph::forward(Context& ctx, int64_t n) {
  TANDEM_CHECK(n > 0 && n <= max_batch_, "batch of " + std::to_string(n) + " samples");
  for (size_t i = 0; i < layers_.size(); ++i) {
    Tensor x = acts_[i].prefix(n);
    Tensor y = acts_[i + 1].prefix(n);
    if (layers_[i]->is_view()) continue;
    if (hook_) hook_(i, false, false);
    layers_[i]->forward(ctx, x, y);
    if (hook_) hook_(i, false, true);
  }
  return acts_.back().prefix(n);
}

void Graph::backward(Context& ctx, const Tensor& dlogits) {
  const int64_t n = dlogits.dim(0);
  Tensor top = grads_.back().prefix(n);
  if (top.data() != dlogits.data()) ctx.backend.copy(top, dlogits);
  const size_t first = first_trainable();
  for (size_t i = layers_.size(); i-- > first;) {
    if (layers_[i]->is_view()) continue;
    Tensor x = acts_[i].prefix(n), y = acts_[i + 1].prefix(n), dy = grads_[i + 1].prefix(n);
    Tensor dx = i > first ? grads_[i].prefix(n) : Tensor();
    if (hook_) hook_(i, true, false);
    layers_[i]->backward(ctx, x, y, dy, i > first ? &dx : nullptr);
    if (hook_) hook_(i, true, true);
  }
}

size_t Graph::first_trainable() const {
  size_t first = 0;
  while (first < layers_.size() && layers_[first]->params().empty()) ++first;
  return first;
}

Tensor Graph::input_gradient(size_t layer, int64_t n) const {
  return layer > first_trainable() ? grads_[layer].prefix(n) : Tensor();
}

std::vector<Param*> Graph::params() {
  std::vector<Param*> out;
  for (auto& layer : layers_)
    for (Param& p : layer->params()) out.push_back(&p);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Graph::buffers() {
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& layer : layers_)
    for (auto& b : layer->buffers()) out.push_back(std::move(b));
  return out;
}

int64_t Graph::min_training_batch() const {
  int64_t n = 1;
  for (const auto& layer : layers_) n = std::max(n, layer->min_training_batch());
  return n;
}

std::vector<SummaryRow> Graph::summary() const {
  std::vector<SummaryRow> rows;
  for (const auto& layer : layers_) {
    int64_t params = 0;
    for (const Param& p : layer->params()) params += p.shape.numel();
    rows.push_back({layer->index() + 1, layer->name(), layer->type(), layer->output_shape(), params,
                    layer->flops()});
  }
  return rows;
}

int64_t Graph::parameter_count() const {
  int64_t n = 0;
  for (const auto& r : summary()) n += r.params;
  return n;
}

int64_t Graph::forward_flops() const {
  int64_t n = 0;
  for (const auto& layer : layers_) n += layer->flops();
  return n;
}

}  // namespace tandem
