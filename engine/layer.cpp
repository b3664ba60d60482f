// Layer's shared bookkeeping.
#include "engine/layer.h"

namespace tandem {

Param& Layer::add_param(std::string suffix, Shape shape, Init init, int64_t fan_in,
                        int64_t fan_out) {
  Param p;
  p.name = name_ + "." + suffix;
  p.shape = std::move(shape);
  p.init = init;
  p.fan_in = fan_in;
  p.fan_out = fan_out;
  params_.push_back(std::move(p));
  return params_.back();
}

}  // namespace tandem
