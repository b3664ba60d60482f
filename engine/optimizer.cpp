// Optimizer steps through the backend's fused updates, and the schedules.
#include "engine/optimizer.h"

#include <cmath>

namespace tandem {

namespace {

// Whether `next` starts where `prev` ends in the same buffer, in packed_numel steps.
bool packed_after(const Tensor& prev, const Tensor& next) {
  return next.shares_storage(prev) && next.data() == prev.data() + packed_numel(prev.shape());
}

}  // namespace

Optimizer::Optimizer(const OptimizerConfig& config, std::vector<Param*> params, Backend& backend)
    : config_(config), backend_(backend) {
  // A frozen layer's parameters are not the optimizer's: no state, no update, no weight decay.
  for (Param* p : params)
    if (p->trainable) params_.push_back(p);
  int64_t packed = 0;
  for (Param* p : params_) packed += packed_numel(p->shape);
  const bool adam = config_.type != "sgd";
  Tensor m(backend_, Shape{packed}), v;
  backend_.fill(m, 0.f);
  if (adam) {
    v = Tensor(backend_, Shape{packed});
    backend_.fill(v, 0.f);
  }
  packed_m_ = m;
  packed_v_ = v;
  int64_t offset = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Param& p = *params_[i];
    m_.push_back(m.view(offset, p.shape));
    if (adam) v_.push_back(v.view(offset, p.shape));
    offset += packed_numel(p.shape);
    // A run is a stretch of params back to back of one lr multiplier (a frozen layer between
    // two trainable ones ends one).
    const bool joins = i > 0 && packed_after(params_[i - 1]->value, p.value) &&
                       packed_after(params_[i - 1]->grad, p.grad) &&
                       params_[i - 1]->lr_mult == p.lr_mult;
    if (!joins) runs_.push_back(Run{i, 0, p.lr_mult});
    Run& run = runs_.back();
    run.numel = (p.value.data() - params_[run.first]->value.data()) + p.shape.numel();
  }
}

void Optimizer::step(double lr, const Tensor* gate) {
  if (!gate) ++steps_;
  const int64_t count = gate ? steps_ + 1 : steps_;  // this update's, should it apply
  for (const Run& run : runs_) {
    const Shape flat{run.numel};
    const double run_lr = lr * run.lr_mult;
    Param& p = *params_[run.first];
    Tensor w = p.value.view(0, flat), grad = p.grad.view(0, flat), m = m_[run.first].view(0, flat);
    if (config_.type == "sgd") {
      SgdParams s;
      s.lr = static_cast<float>(run_lr);
      s.momentum = static_cast<float>(config_.momentum);
      s.weight_decay = static_cast<float>(config_.weight_decay);
      s.nesterov = config_.nesterov;
      s.gate = gate;
      backend_.sgd_update(w, m, grad, s);
    } else {
      AdamParams a;
      a.lr = static_cast<float>(run_lr);
      a.beta1 = static_cast<float>(config_.beta1);
      a.beta2 = static_cast<float>(config_.beta2);
      a.eps = static_cast<float>(config_.eps);
      a.weight_decay = static_cast<float>(config_.weight_decay);
      a.decoupled = config_.type == "adamw";
      a.step = count;
      a.gate = gate;
      Tensor v = v_[run.first].view(0, flat);
      backend_.adam_update(w, m, v, grad, a);
    }
  }
}

std::vector<Tensor*> Optimizer::state_tensors() {
  std::vector<Tensor*> out{&packed_m_};
  if (config_.type != "sgd") out.push_back(&packed_v_);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Optimizer::state() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string name = "optimizer." + params_[i]->name;
    if (config_.type == "sgd") {
      out.emplace_back(name + ".velocity", m_[i]);
    } else {
      out.emplace_back(name + ".m", m_[i]);
      out.emplace_back(name + ".v", v_[i]);
    }
  }
  return out;
}

double learning_rate(const OptimizerConfig& opt, const ScheduleConfig& s, int64_t epochs,
                     int64_t epoch, int64_t step_in_epoch, int64_t steps_per_epoch) {
  double lr = opt.lr;
  if (s.type == "step") {
    lr *= std::pow(s.gamma, static_cast<double>(epoch / s.step));
  } else if (s.type == "multistep") {
    for (int64_t m : s.milestones)
      if (epoch >= m) lr *= s.gamma;
  } else if (s.type == "cosine") {
    const double t = epochs > 1 ? static_cast<double>(epoch) / static_cast<double>(epochs) : 0.0;
    lr = s.min_lr + (opt.lr - s.min_lr) * 0.5 * (1.0 + std::cos(M_PI * t));
  }
  if (s.warmup_epochs > 0 && epoch < s.warmup_epochs) {
    const double done = static_cast<double>(epoch * steps_per_epoch + step_in_epoch + 1);
    lr *= done / static_cast<double>(s.warmup_epochs * steps_per_epoch);
  }
  return lr;
}

}  // namespace tandem
