// add, multiply and concat.
#include "layers/merge.h"

#include "engine/error.h"

namespace tandem {

Shape Add::setup_inputs(const std::vector<Shape>& in) {
  for (const Shape& s : in)
    if (s != in.front())
      throw ConfigError(
          "add needs inputs of one shape, got " + in.front().str() + " and " + s.str(),
          "make the branches end in the same shape (a 1x1 conv2d can match the "
          "channels, its stride the height and width)");
  ins_ = in;
  in_ = in.front();
  out_ = in.front();
  return out_;
}

bool Add::can_fuse_relu(const Backend& backend, DType d) const {
  return backend.fuses_relu(Backend::ReluFusion::kAdd, d);
}

// With a fused relu, the last addition applies it.
void Add::forward_inputs(Context& ctx, const std::vector<Tensor>& xs, Tensor& y) {
  const size_t last = xs.size() - 1;
  for (size_t k = 1; k <= last; ++k) {
    const Tensor& a = k == 1 ? xs[0] : y;
    if (k == last && fused_relu())
      ctx.backend.add_relu(y, a, xs[k]);
    else
      ctx.backend.add(y, a, xs[k]);
  }
}

void Add::backward_inputs(Context& ctx, const std::vector<Tensor>&, const Tensor& y,
                          const Tensor& dy, const std::vector<Tensor*>& dxs) {
  if (fused_relu()) return ctx.backend.add_relu_backward(dxs, dy, y);
  for (Tensor* dx : dxs)
    if (dx) ctx.backend.copy(*dx, dy);
}

int64_t Add::flops() const { return static_cast<int64_t>(ins_.size() - 1) * out_.numel(); }

Shape Multiply::setup_inputs(const std::vector<Shape>& in) {
  if (in.size() != 2)
    throw ConfigError("multiply takes two inputs, got " + std::to_string(in.size()),
                      "list two layers under 'inputs:' (a gate is multiplied into one branch)");
  // A per-channel gate: (C) or (C,1,1) against (C,H,W) of the same C.
  auto gates = [](const Shape& g, const Shape& x) {
    return x.rank() == 3 && g[0] == x[0] &&
           (g.rank() == 1 || (g.rank() == 3 && g[1] == 1 && g[2] == 1)) && g != x;
  };
  if (in[0] == in[1])
    gate_ = 1;
  else if (gates(in[1], in[0]))
    gate_ = 1;
  else if (gates(in[0], in[1]))
    gate_ = 0;
  else
    throw ConfigError(
        "multiply needs inputs of one shape, or a (C) or (C,1,1) gate and a (C,H,W) input of the "
        "same C; got " +
            in[0].str() + " and " + in[1].str(),
        "a squeeze-and-excitation gate is global_avgpool, 1x1 conv2d layers and a sigmoid, its "
        "last conv2d with as many filters as the input has channels");
  ins_ = in;
  in_ = in[1 - gate_];
  out_ = in_;
  return out_;
}

void Multiply::forward_inputs(Context& ctx, const std::vector<Tensor>& xs, Tensor& y) {
  ctx.backend.multiply(y, xs[1 - gate_], xs[gate_]);
}

void Multiply::backward_inputs(Context& ctx, const std::vector<Tensor>& xs, const Tensor&,
                               const Tensor& dy, const std::vector<Tensor*>& dxs) {
  ctx.backend.multiply_backward(dxs[1 - gate_], dxs[gate_], dy, xs[1 - gate_], xs[gate_]);
}

Shape Concat::setup_inputs(const std::vector<Shape>& in) {
  const Shape& first = in.front();
  int64_t axis = 0;
  for (const Shape& s : in) {
    bool same = s.rank() == first.rank();
    for (int d = 1; same && d < s.rank(); ++d) same = s[d] == first[d];
    if (!same)
      throw ConfigError(
          "concat joins inputs along their first axis (channels, or features), so "
          "the others must agree; got " +
              first.str() + " and " + s.str(),
          first.rank() == 3 ? "make the branches keep the same height and width "
                              "(padding, stride)"
                            : "flatten every branch, or none");
    axis += s[0];
  }
  std::vector<int64_t> dims(static_cast<size_t>(first.rank()));
  for (int d = 0; d < first.rank(); ++d) dims[static_cast<size_t>(d)] = d == 0 ? axis : first[d];
  ins_ = in;
  in_ = first;
  out_ = Shape(dims);
  return out_;
}

// Per sample, input k fills the next input-size run of the output's values.
void Concat::forward_inputs(Context& ctx, const std::vector<Tensor>& xs, Tensor& y) {
  int64_t at = 0;
  for (size_t k = 0; k < xs.size(); ++k) {
    const int64_t size = ins_[k].numel();
    ctx.backend.copy_columns(y, at, xs[k], 0, size);
    at += size;
  }
}

void Concat::backward_inputs(Context& ctx, const std::vector<Tensor>&, const Tensor&,
                             const Tensor& dy, const std::vector<Tensor*>& dxs) {
  int64_t at = 0;
  for (size_t k = 0; k < dxs.size(); ++k) {
    const int64_t size = ins_[k].numel();
    if (dxs[k]) ctx.backend.copy_columns(*dxs[k], 0, dy, at, size);
    at += size;
  }
}

}  // namespace tandem
