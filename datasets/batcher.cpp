// Batcher: per-epoch shuffled order from Philox, and normalised fp32 batches cut from uint8 data
// (held, or decoded on the fly).
#include <fmt/format.h>

#include <algorithm>
#include <exception>

#include "datasets/dataset.h"
#include "engine/error.h"
#include "engine/rng.h"

namespace tandem {

namespace {

// Channels of a sample shape: C of (C,H,W); one for any other rank.
int64_t channels_of(const Shape& s) { return s.rank() == 3 ? s[0] : 1; }

// Random word k of stream (key, stream).
uint32_t philox_word(uint64_t key, uint64_t stream, uint64_t k) {
  uint64_t block = k >> 2;
  Philox4 r =
      philox4x32_10(static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                    static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32), key);
  return r.v[k & 3];
}

}  // namespace

void read_samples(const Dataset& data, const int64_t* which, int64_t n, uint8_t* out) {
  const int64_t numel = data.sample_shape.numel();
  if (!data.on_the_fly()) {
    for (int64_t k = 0; k < n; ++k)
      std::copy_n(data.images.data() + which[k] * numel, numel, out + k * numel);
    return;
  }
  // An exception must not leave an OpenMP loop: the first one is kept and rethrown after it.
  std::exception_ptr error;
#pragma omp parallel for schedule(dynamic, 4) if (n > 1)
  for (int64_t k = 0; k < n; ++k) {
    try {
      data.read(which[k], out + k * numel);
    } catch (...) {
#pragma omp critical(tandem_read_samples)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

void cache_samples(Dataset& data) {
  if (!data.on_the_fly()) return;
  std::vector<int64_t> all(static_cast<size_t>(data.size()));
  for (int64_t i = 0; i < data.size(); ++i) all[i] = i;
  data.images.resize(static_cast<size_t>(data.size() * data.sample_shape.numel()));
  read_samples(data, all.data(), data.size(), data.images.data());
  data.read = nullptr;
}

Batcher::Batcher(const Dataset& data, int64_t batch_size, bool shuffle, uint64_t seed,
                 std::vector<float> mean, std::vector<float> std, bool drop_last)
    : data_(data), batch_size_(batch_size), shuffle_(shuffle), seed_(seed), drop_last_(drop_last) {
  if (batch_size <= 0)
    throw DataError("the batch size must be positive, got " + std::to_string(batch_size),
                    "set train.batch_size (or --batch-size) to a positive number");
  const int64_t c = channels_of(data.sample_shape);
  auto expand = [&](std::vector<float> v, float fallback, const char* key) {
    if (v.empty()) return std::vector<float>(static_cast<size_t>(c), fallback);
    if (v.size() == 1) return std::vector<float>(static_cast<size_t>(c), v[0]);
    if (static_cast<int64_t>(v.size()) != c)
      throw DataError("data.normalize." + std::string(key) + " has " + std::to_string(v.size()) +
                          " values but the " + data.name + " samples have " + std::to_string(c) +
                          (c == 1 ? " channel" : " channels"),
                      "give one value for every channel, or a single value for all");
    return v;
  };
  mean = expand(std::move(mean), 0.0f, "mean");
  std = expand(std::move(std), 1.0f, "std");
  for (int64_t i = 0; i < c; ++i) {
    if (!(std[i] > 0.0f))
      throw DataError(fmt::format("data.normalize.std[{}] is {}, not a positive number", i, std[i]),
                      "give the standard deviation of the pixel values on [0, 1], e.g. 0.3081");
    // (x/255 - mean) / std == x * scale + shift.
    scale_.push_back(1.0f / (255.0f * std[i]));
    shift_.push_back(-mean[i] / std[i]);
  }
  start_epoch(0);
}

int64_t Batcher::batches_per_epoch() const {
  const int64_t n = data_.size();
  return drop_last_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
}

void Batcher::set_augment(const AugmentConfig& augment) {
  if (augment.any() && data_.sample_shape.rank() != 3)
    throw DataError("augmentation needs image samples of shape [C, H, W]; " + data_.name +
                        " has " + data_.sample_shape.str(),
                    "remove data.augment, or use an image data set");
  augment_ = augment;
}

void Batcher::start_epoch(int64_t epoch) {
  epoch_ = epoch;
  const int64_t n = data_.size();
  order_.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order_[i] = i;
  if (!shuffle_) return;
  // Fisher-Yates, drawn from Philox (key = seed, stream = epoch) rather than std::shuffle, whose
  // output differs between standard libraries. Index j in [0, i] by Lemire's multiply-shift: the
  // bias, below n / 2^32, is far too small to matter for a training order.
  const uint64_t stream = static_cast<uint64_t>(epoch);
  for (int64_t i = n - 1; i > 0; --i) {
    uint32_t r = philox_word(seed_, stream, static_cast<uint64_t>(n - 1 - i));
    int64_t j =
        static_cast<int64_t>((static_cast<uint64_t>(r) * static_cast<uint64_t>(i + 1)) >> 32);
    std::swap(order_[i], order_[j]);
  }
}

int64_t Batcher::fill(int64_t b, float* images, int32_t* labels) const {
  TANDEM_CHECK(b >= 0 && b < batches_per_epoch(),
               "batch " + std::to_string(b) + " of " + std::to_string(batches_per_epoch()));
  const int64_t first = b * batch_size_;
  const int64_t n = std::min(batch_size_, data_.size() - first);
  const int64_t numel = data_.sample_shape.numel();
  const int64_t c = static_cast<int64_t>(scale_.size());
  const int64_t plane = numel / c;
  const uint8_t* src = data_.images.data();
  const float* scale = scale_.data();
  const float* shift = shift_.data();
  // On the fly the batch's samples are first decoded into one buffer, in batch order.
  std::vector<uint8_t> decoded;
  if (data_.on_the_fly()) {
    decoded.resize(static_cast<size_t>(n * numel));
    read_samples(data_, order_.data() + first, n, decoded.data());
  }
  if (augment_.any()) {
    fill_augmented(first, n, decoded.empty() ? nullptr : decoded.data(), images, labels);
    return n;
  }
#pragma omp parallel for schedule(static) if (n * numel > (1 << 16))
  for (int64_t k = 0; k < n; ++k) {
    const int64_t s = order_[first + k];
    labels[k] = data_.labels[s];
    const uint8_t* __restrict in = decoded.empty() ? src + s * numel : decoded.data() + k * numel;
    float* __restrict out = images + k * numel;
    for (int64_t ch = 0; ch < c; ++ch) {
      const float a = scale[ch], o = shift[ch];
      for (int64_t i = ch * plane; i < (ch + 1) * plane; ++i)
        out[i] = static_cast<float>(in[i]) * a + o;
    }
  }
  return n;
}

// Output pixel (y, x) of sample k is input pixel (y + dy - pad, x' + dx - pad), x' = x or its
// mirror, or a zero pixel where that falls outside; dy, dx in [0, 2 pad] and the flip come from
// three Philox words of (seed, stream 2^32 + epoch, 3 * position). `decoded`: the samples read on
// the fly; null: they are in data_.images.
void Batcher::fill_augmented(int64_t first, int64_t n, const uint8_t* decoded, float* images,
                             int32_t* labels) const {
  const Shape& shape = data_.sample_shape;
  const int64_t c = shape[0], h = shape[1], w = shape[2], pad = augment_.crop_padding;
  const uint64_t stream = (1ull << 32) + static_cast<uint64_t>(epoch_);
#pragma omp parallel for schedule(static) if (n * shape.numel() > (1 << 16))
  for (int64_t k = 0; k < n; ++k) {
    const int64_t s = order_[first + k];
    labels[k] = data_.labels[s];
    const uint64_t at = 3 * static_cast<uint64_t>(first + k);
    const int64_t span = 2 * pad + 1;
    const int64_t dy = pad ? philox_word(seed_, stream, at) % span - pad : 0;
    const int64_t dx = pad ? philox_word(seed_, stream, at + 1) % span - pad : 0;
    const bool flip = augment_.flip && (philox_word(seed_, stream, at + 2) & 1);
    const uint8_t* in =
        decoded ? decoded + k * shape.numel() : data_.images.data() + s * shape.numel();
    float* out = images + k * shape.numel();
    for (int64_t ch = 0; ch < c; ++ch) {
      const float a = scale_[ch], o = shift_[ch];
      for (int64_t y = 0; y < h; ++y) {
        const int64_t sy = y + dy;
        for (int64_t x = 0; x < w; ++x) {
          const int64_t sx = (flip ? w - 1 - x : x) + dx;
          const bool inside = sy >= 0 && sy < h && sx >= 0 && sx < w;
          const float v = inside ? static_cast<float>(in[(ch * h + sy) * w + sx]) : 0.f;
          out[(ch * h + y) * w + x] = v * a + o;
        }
      }
    }
  }
}

}  // namespace tandem
