// Optimizer steps through the backend's fused updates, and the schedules.
#include "engine/optimizer.h"

#include <cmath>

namespace tandem {

Optimizer::Optimizer(const OptimizerConfig& config, std::vector<Param*> params, Backend& backend)
    : config_(config), params_(std::move(params)), backend_(backend) {
  for (Param* p : params_) {
    m_.emplace_back(backend_, p->shape);
    backend_.fill(m_.back(), 0.f);
    if (config_.type != "sgd") {
      v_.emplace_back(backend_, p->shape);
      backend_.fill(v_.back(), 0.f);
    }
  }
}

void Optimizer::step(double lr) {
  ++steps_;
  for (size_t i = 0; i < params_.size(); ++i) {
    Param& p = *params_[i];
    if (config_.type == "sgd") {
      SgdParams s;
      s.lr = static_cast<float>(lr);
      s.momentum = static_cast<float>(config_.momentum);
      s.weight_decay = static_cast<float>(config_.weight_decay);
      s.nesterov = config_.nesterov;
      backend_.sgd_update(p.value, m_[i], p.grad, s);
    } else {
      AdamParams a;
      a.lr = static_cast<float>(lr);
      a.beta1 = static_cast<float>(config_.beta1);
      a.beta2 = static_cast<float>(config_.beta2);
      a.eps = static_cast<float>(config_.eps);
      a.weight_decay = static_cast<float>(config_.weight_decay);
      a.decoupled = config_.type == "adamw";
      a.step = steps_;
      backend_.adam_update(p.value, m_[i], v_[i], p.grad, a);
    }
  }
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
