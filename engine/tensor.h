// Shape and Tensor: a dense array (NCHW row-major, or channels-last) whose storage a Backend owns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace tandem {

class Backend;

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t operator[](int i) const { return dims_[i < 0 ? i + rank() : i]; }
  int64_t& operator[](int i) { return dims_[i < 0 ? i + rank() : i]; }
  int64_t numel() const;
  const std::vector<int64_t>& dims() const { return dims_; }
  // The same shape with a leading batch axis of size n: (C,H,W) -> (n,C,H,W).
  Shape with_batch(int64_t n) const;
  // The shape without its leading axis: (N,C,H,W) -> (C,H,W).
  Shape without_batch() const;
  std::string str() const;  // "[64, 1, 28, 28]"
  bool operator==(const Shape& o) const { return dims_ == o.dims_; }
  bool operator!=(const Shape& o) const { return dims_ != o.dims_; }

 private:
  std::vector<int64_t> dims_;
};

// kBF16 and kF16 hold the activations of a 16-bit run (engine/precision.h); parameters,
// gradients of parameters and optimizer state stay kF32.
enum class DType { kF32, kI32, kBF16, kF16 };
inline size_t dtype_size(DType d) { return d == DType::kBF16 || d == DType::kF16 ? 2 : 4; }
inline bool is_16bit(DType d) { return d == DType::kBF16 || d == DType::kF16; }
const char* dtype_name(DType d);  // "fp32", "int32", "bf16", "fp16"

// The memory order of a tensor. The shape is always the logical one, (N,C,H,W) for images;
// kChannelsLast (4-D only) stores it as (N,H,W,C), the order 16-bit convolution kernels read
// without a reorder. kBlocked8 and kBlocked16 (4-D only, C a multiple of the block) store it as
// (N, C/b, H, W, b), oneDNN's nChw8c and nChw16c: the order its fp32 convolution kernels for AVX2
// and AVX-512 read and write, so that a chain of convolutions, normalizations and activations
// runs with no reorder between them. Ops define results by the logical shape.
enum class Layout { kPlain, kChannelsLast, kBlocked8, kBlocked16 };
// The channel block of a blocked layout (8, 16); 0 for the others.
inline int channel_block(Layout l) {
  return l == Layout::kBlocked8 ? 8 : l == Layout::kBlocked16 ? 16 : 0;
}
const char* layout_name(Layout l);  // "plain", "nhwc", "nChw8c", "nChw16c"

// A Tensor is a cheap handle: copies share storage. Views (reshape, leading-axis prefix) share it
// too.
class Tensor {
 public:
  Tensor() = default;
  Tensor(Backend& backend, Shape shape, DType dtype = DType::kF32, Layout layout = Layout::kPlain);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int64_t numel() const { return shape_.numel(); }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Layout layout() const { return layout_; }
  bool is_f32_plain() const { return dtype_ == DType::kF32 && layout_ == Layout::kPlain; }
  Backend& backend() const { return *backend_; }
  int64_t dim(int i) const { return shape_[i]; }

  // Raw pointers to backend memory (device memory for GPU tensors): for backend ops only.
  float* data() { return static_cast<float*>(ptr_); }
  const float* data() const { return static_cast<const float*>(ptr_); }
  int32_t* data_i32() { return static_cast<int32_t*>(ptr_); }
  const int32_t* data_i32() const { return static_cast<const int32_t*>(ptr_); }
  void* raw() { return ptr_; }  // any dtype
  const void* raw() const { return ptr_; }

  // Same storage, another shape of the same number of elements (a channels-last tensor keeps its
  // rank: its memory order is not the logical one).
  Tensor reshape(Shape shape) const;
  // Same storage and shape, seen in another memory order (a buffer reused for another layout).
  Tensor with_layout(Layout layout) const;
  // The first n entries along the leading axis (a smaller last batch reuses the same buffers).
  Tensor prefix(int64_t n) const;
  // Entries [begin, begin + n) along the leading axis: e.g. two scalars kept in one buffer, so
  // that one download reads both.
  Tensor rows(int64_t begin, int64_t n) const;
  // The elements [offset, offset + shape.numel()) of this view's storage, as `shape` (within
  // capacity()), in plain order: a tensor packed into a larger buffer, or several packed ones seen
  // as one.
  Tensor view(int64_t offset, Shape shape) const;
  bool shares_storage(const Tensor& other) const { return storage_ == other.storage_; }
  // Capacity in elements of the underlying storage from this view's start.
  int64_t capacity() const { return capacity_; }

 private:
  Backend* backend_ = nullptr;
  std::shared_ptr<void> storage_;
  void* ptr_ = nullptr;
  Shape shape_;
  DType dtype_ = DType::kF32;
  Layout layout_ = Layout::kPlain;
  int64_t capacity_ = 0;
};

}  // namespace tandem
