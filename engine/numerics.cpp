// The diagnosis of a non-finite training step: input, weights, then layer by layer.
#include "engine/numerics.h"

#include <fmt/format.h>

#include <cmath>

#include "engine/config.h"
#include "engine/trainer.h"

namespace tandem {
namespace {

std::string nonfinite_values(int64_t k) {
  return fmt::format("{} non-finite value{}", k, k == 1 ? "" : "s");
}

std::string of_layer(const Layer& layer) {
  return fmt::format("{} (layer {}, {})", layer.name(), layer.index() + 1, layer.type());
}

}  // namespace

bool gradients_finite(Graph& graph, Backend& backend) {
  std::vector<const Tensor*> grads;
  for (const Param* p : graph.params()) grads.push_back(&p->grad);
  return backend.count_nonfinite(grads) == 0;
}

std::string nonfinite_weights(Graph& graph, Backend& backend) {
  // One wait for the device when every weight is finite (each epoch's end); naming the tensor
  // at fault takes one per tensor.
  std::vector<const Tensor*> values;
  for (const Param* p : graph.params()) values.push_back(&p->value);
  if (backend.count_nonfinite(values) == 0) return "";
  for (const Param* p : graph.params())
    if (int64_t bad = backend.count_nonfinite(p->value))
      return fmt::format("the weights {} hold {}", p->name, nonfinite_values(bad));
  return "";
}

std::string locate_nonfinite(TrainStep& step, int64_t n, uint64_t step_id) {
  Backend& backend = step.backend();
  Graph& graph = step.graph();
  if (int64_t bad = backend.count_nonfinite(graph.input().prefix(n)))
    return fmt::format("{} {} (check data.normalize)", kNonfiniteInput, nonfinite_values(bad));
  if (std::string weights = nonfinite_weights(graph, backend); !weights.empty())
    return weights + ": an earlier update made them so";

  // Input and weights are finite: the step itself made the value. Run it again, checking each
  // layer's output after its forward, the loss and its gradient between the passes, and each
  // layer's parameter and input gradients after its backward; the first one found is named.
  const auto& layers = graph.layers();
  std::string found;
  bool between_passes = true;
  auto check = [&](const Tensor& t, const std::string& what) {
    if (!found.empty() || !t.defined()) return;
    if (int64_t bad = backend.count_nonfinite(t))
      found = fmt::format("{}, {} of {} values", what, bad, t.numel());
  };
  auto check_loss = [&] {
    between_passes = false;
    if (!found.empty()) return;
    double loss, correct;
    step.read(&loss, &correct);
    if (!std::isfinite(loss))
      found = fmt::format("the {} loss of finite outputs", step.loss().type());
    check(graph.output_gradient(layers.size() - 1, n),
          "the loss gradient (of the model's outputs)");
  };
  Graph::ScopedHook hook(graph, [&](size_t i, bool backward, bool done) {
    const Layer& layer = *layers[i];
    if (!backward) {
      if (done) check(graph.output(i, n), "output of " + of_layer(layer));
    } else if (!done) {
      if (between_passes) check_loss();
    } else {
      for (const Param& p : layer.params())
        check(p.grad, "gradient of " + p.name + " in the backward pass");
      check(graph.input_gradient(i, n),
            "gradient of the input of " + of_layer(layer) + " in the backward pass");
    }
  });
  step.compute(n, step_id);
  if (between_passes) check_loss();  // a model whose backward ran no layer
  if (found.empty()) return "run again, the step gave finite values throughout";
  return "first non-finite value: " + found;
}

// A tenth of 1e6 would diverge too: the rate to try is no more than the optimizer's usual one.
NumericsError nonfinite_error(const OptimizerConfig& opt, double lr, std::string cause) {
  // Normalised pixels are finite unless data.normalize makes them not: a smaller rate won't help.
  if (cause.find(kNonfiniteInput) != std::string::npos)
    return NumericsError(std::move(cause),
                         "give data.normalize a finite mean and a std well above 0 for each "
                         "channel (or 'normalize: auto'), then run again");
  const bool sgd = opt.type == "sgd";
  const double usual = !sgd ? 0.001 : opt.momentum > 0 ? 0.01 : 0.1;
  const double next = std::min(opt.lr / 10, usual);
  const std::string range =
      opt.lr / 10 > usual
          ? fmt::format(
                ", usual for {}{}", opt.type,
                sgd && opt.momentum > 0 ? fmt::format(" with momentum {:g}", opt.momentum) : "")
          : "";
  return NumericsError(
      std::move(cause),
      lr == opt.lr
          ? fmt::format("lower the learning rate (it was {:g}; try --lr {:g}{})", lr, next, range)
          : fmt::format("lower the learning rate (the schedule had made it {:g} from --lr "
                        "{:g}; try --lr {:g}{} or a gentler schedule)",
                        lr, opt.lr, next, range));
}

std::string loss_text(double l) {
  return std::isnan(l) ? "NaN" : std::isinf(l) ? "infinite" : fmt::format("{:.5g}", l);
}

}  // namespace tandem
