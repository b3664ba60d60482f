// Shape arithmetic and Tensor views.
#include "engine/tensor.h"

#include <algorithm>

#include "engine/backend.h"
#include "engine/error.h"

namespace tandem {

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

Shape Shape::with_batch(int64_t n) const {
  std::vector<int64_t> d{n};
  d.insert(d.end(), dims_.begin(), dims_.end());
  return Shape(std::move(d));
}

Shape Shape::without_batch() const {
  TANDEM_CHECK(!dims_.empty(), "shape has no batch axis");
  return Shape(std::vector<int64_t>(dims_.begin() + 1, dims_.end()));
}

std::string Shape::str() const {
  std::string s = "[";
  for (size_t i = 0; i < dims_.size(); ++i) s += (i ? ", " : "") + std::to_string(dims_[i]);
  return s + "]";
}

const char* dtype_name(DType d) {
  switch (d) {
    case DType::kF32:
      return "fp32";
    case DType::kI32:
      return "int32";
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "fp16";
  }
  return "?";
}

Tensor::Tensor(Backend& backend, Shape shape, DType dtype, Layout layout)
    : backend_(&backend), shape_(std::move(shape)), dtype_(dtype), layout_(layout) {
  TANDEM_CHECK(layout_ == Layout::kPlain ||
                   (shape_.rank() == 4 && shape_[1] % std::max(1, channel_block(layout_)) == 0),
               std::string("a ") + layout_name(layout_) + " tensor is 4-D, got " + shape_.str());
  capacity_ = shape_.numel();
  storage_ = backend.allocate(std::max<size_t>(bytes(), 4));
  ptr_ = storage_.get();
}

Tensor Tensor::reshape(Shape shape) const {
  TANDEM_CHECK(shape.numel() == numel(), "reshape " + shape_.str() + " to " + shape.str());
  TANDEM_CHECK(layout_ == Layout::kPlain || shape == shape_,
               "reshape of a channels-last " + shape_.str() + " to " + shape.str());
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::kPlain:
      return "plain";
    case Layout::kChannelsLast:
      return "nhwc";
    case Layout::kBlocked8:
      return "nChw8c";
    case Layout::kBlocked16:
      return "nChw16c";
  }
  return "?";
}

Tensor Tensor::with_layout(Layout layout) const {
  TANDEM_CHECK(layout == Layout::kPlain ||
                   (shape_.rank() == 4 && shape_[1] % std::max(1, channel_block(layout)) == 0),
               std::string("a ") + layout_name(layout) + " tensor is 4-D, got " + shape_.str());
  Tensor t = *this;
  t.layout_ = layout;
  return t;
}

Tensor Tensor::prefix(int64_t n) const {
  TANDEM_CHECK(shape_.rank() > 0 && n >= 0 && n <= shape_[0], "prefix of " + shape_.str());
  Tensor t = *this;
  t.shape_[0] = n;
  return t;
}

Tensor Tensor::rows(int64_t begin, int64_t n) const {
  TANDEM_CHECK(
      shape_.rank() > 0 && begin >= 0 && n >= 0 && begin + n <= shape_[0],
      "rows [" + std::to_string(begin) + ", " + std::to_string(begin + n) + ") of " + shape_.str());
  const int64_t row = shape_[0] ? numel() / shape_[0] : 0;
  Shape shape = shape_;
  shape[0] = n;
  return view(begin * row, std::move(shape)).with_layout(layout_);  // whole rows keep the order
}

Tensor Tensor::view(int64_t offset, Shape shape) const {
  TANDEM_CHECK(offset >= 0 && offset + shape.numel() <= capacity_,
               "view of " + shape.str() + " at " + std::to_string(offset) + " in a storage of " +
                   std::to_string(capacity_) + " elements");
  Tensor t = *this;
  t.shape_ = std::move(shape);
  t.layout_ = Layout::kPlain;
  t.ptr_ = static_cast<char*>(ptr_) + static_cast<size_t>(offset) * dtype_size(dtype_);
  t.capacity_ = capacity_ - offset;
  return t;
}

}  // namespace tandem
