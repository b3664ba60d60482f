// Synthetic data set: one random prototype pattern per class, samples = scaled prototype + noise.
#include "datasets/synthetic.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <new>
#include <stdexcept>

#include "engine/error.h"
#include "engine/progress.h"
#include "engine/rng.h"

namespace tandem {

namespace {

// Philox streams (key = seed): prototypes, then the per-sample draws of each split.
constexpr uint64_t kPrototypeStream = 0x5E7A0001;
constexpr uint64_t kTrainStream = 0x5E7A0002;
constexpr uint64_t kTestStream = 0x5E7A0003;

constexpr float kNoiseStd = 48.0f;   // grey levels
constexpr float kAmplitude = 24.0f;  // prototype std in grey levels at 784 values per sample

struct Geometry {
  int64_t planes, h, w;
};

// (C,H,W) -> C planes of HxW; (H,W) -> one plane; (N) -> one 1xN plane.
Geometry geometry(const Shape& s) {
  if (s.rank() >= 3) return {s.numel() / (s[-2] * s[-1]), s[-2], s[-1]};
  if (s.rank() == 2) return {1, s[0], s[1]};
  return {1, 1, s.numel()};
}

// Prototypes (classes x numel floats): per plane a coarse grid of standard normals, bilinearly
// upsampled to HxW, then shifted and scaled to zero mean and unit variance per class.
std::vector<float> prototypes(const Shape& shape, int classes, uint64_t seed) {
  Geometry g = geometry(shape);
  const int64_t gh = std::clamp<int64_t>((g.h + 3) / 4, 1, 8),
                gw = std::clamp<int64_t>((g.w + 3) / 4, 1, 8);
  const int64_t numel = shape.numel();
  std::vector<float> out(static_cast<size_t>(classes * numel));
  for (int c = 0; c < classes; ++c) {
    float* p = out.data() + c * numel;
    for (int64_t pl = 0; pl < g.planes; ++pl) {
      std::vector<double> grid(static_cast<size_t>(gh * gw));
      for (int64_t k = 0; k < gh * gw; ++k)
        grid[k] = philox_normal(seed, kPrototypeStream, (c * g.planes + pl) * gh * gw + k);
      for (int64_t y = 0; y < g.h; ++y) {
        // Corner pixels sit on the corner grid points (align-corners interpolation).
        double fy = g.h > 1 ? static_cast<double>(y) * (gh - 1) / (g.h - 1) : 0.0;
        int64_t y0 = std::min<int64_t>(static_cast<int64_t>(fy), gh - 1),
                y1 = std::min(y0 + 1, gh - 1);
        double ty = fy - y0;
        for (int64_t x = 0; x < g.w; ++x) {
          double fx = g.w > 1 ? static_cast<double>(x) * (gw - 1) / (g.w - 1) : 0.0;
          int64_t x0 = std::min<int64_t>(static_cast<int64_t>(fx), gw - 1),
                  x1 = std::min(x0 + 1, gw - 1);
          double tx = fx - x0;
          double v = (1 - ty) * ((1 - tx) * grid[y0 * gw + x0] + tx * grid[y0 * gw + x1]) +
                     ty * ((1 - tx) * grid[y1 * gw + x0] + tx * grid[y1 * gw + x1]);
          p[(pl * g.h + y) * g.w + x] = static_cast<float>(v);
        }
      }
    }
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < numel; ++i) sum += p[i];
    double mean = sum / numel;
    for (int64_t i = 0; i < numel; ++i) sq += (p[i] - mean) * (p[i] - mean);
    double inv = sq > 0 ? 1.0 / std::sqrt(sq / numel) : 0.0;
    for (int64_t i = 0; i < numel; ++i) p[i] = static_cast<float>((p[i] - mean) * inv);
  }
  return out;
}

}  // namespace

Dataset make_synthetic(const Shape& shape, int classes, int64_t size, uint64_t seed, bool train) {
  TANDEM_CHECK(shape.rank() >= 1 && shape.numel() > 0, "synthetic shape " + shape.str());
  if (classes < 1)
    throw DataError("synthetic data needs at least 1 class, got " + std::to_string(classes),
                    "set data.classes to the model's number of outputs");
  if (size < 0)
    throw DataError("synthetic data size is negative (" + std::to_string(size) + ")",
                    "set data.train_size and data.test_size to positive counts");
  const int64_t numel = shape.numel();
  // The same signal-to-noise ratio per sample whatever its size.
  const float amp = kAmplitude * static_cast<float>(std::sqrt(784.0 / static_cast<double>(numel)));
  const uint64_t stream = train ? kTrainStream : kTestStream;
  const uint32_t s_lo = static_cast<uint32_t>(stream), s_hi = static_cast<uint32_t>(stream >> 32);
  // Uniform noise of std kNoiseStd: width sqrt(12) * std.
  const float noise_scale = kNoiseStd * 3.4641016f;

  Dataset d;
  d.name = std::string("synthetic ") + (train ? "train" : "test") + " (seed " +
           std::to_string(seed) + ")";
  d.sample_shape = shape;
  d.classes = classes;
  for (int c = 0; c < classes; ++c) d.class_names.push_back(std::to_string(c));
  // A byte a value and a 4-byte label a sample, all kept in memory: a size beyond the host's
  // memory is the config's mistake, named as such rather than as an allocation failure.
  auto too_large = [&](const std::string& bytes) {
    return DataError(fmt::format("the {} data: {} samples of {} take {}, more memory than this "
                                 "machine has",
                                 d.name, size, shape.str(), bytes),
                     fmt::format("lower {} (synthetic data is kept in memory)",
                                 train ? "data.train_size" : "data.test_size"));
  };
  if (size > 0 && numel + 4 > INT64_MAX / size) throw too_large("more than 8 EiB");
  std::vector<float> proto;
  try {
    d.labels.resize(static_cast<size_t>(size));
    d.images.resize(static_cast<size_t>(size * numel));
    proto = prototypes(shape, classes, seed);
  } catch (const std::bad_alloc&) {
    throw too_large(format_bytes(static_cast<size_t>(size * (numel + 4))));
  } catch (const std::length_error&) {
    throw too_large(format_bytes(static_cast<size_t>(size * (numel + 4))));
  }
  // Sample i draws from counter blocks (i, k, stream): block k = 0 gives its amplitude, blocks
  // k >= 1 four noise words each.
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < size; ++i) {
    const int label = static_cast<int>(i % classes);
    d.labels[i] = label;
    const uint32_t i_lo = static_cast<uint32_t>(i);
    Philox4 head = philox4x32_10(i_lo, 0, s_lo, s_hi ^ static_cast<uint32_t>(i >> 32), seed);
    const float a = (0.5f + philox_to_unit(head.v[0])) * amp;
    const float* p = proto.data() + label * numel;
    uint8_t* out = d.images.data() + i * numel;
    for (int64_t j0 = 0; j0 < numel; j0 += 4) {
      Philox4 r = philox4x32_10(i_lo, static_cast<uint32_t>(1 + j0 / 4), s_lo,
                                s_hi ^ static_cast<uint32_t>(i >> 32), seed);
      for (int64_t j = j0; j < std::min(j0 + 4, numel); ++j) {
        float noise = (philox_to_unit(r.v[j - j0]) - 0.5f) * noise_scale;
        float v = 128.0f + a * p[j] + noise;
        v = std::clamp(v, 0.0f, 255.0f);
        out[j] = static_cast<uint8_t>(v + 0.5f);
      }
    }
  }
  return d;
}

}  // namespace tandem
