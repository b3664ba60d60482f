// Normalisation statistics of a split, and the validation share held out of the train split.
#include "datasets/split.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "engine/error.h"
#include "engine/rng.h"

namespace tandem {

namespace {

// The Philox stream of the validation draw: apart from the per-epoch shuffles (stream = epoch).
constexpr uint64_t kValStream = 0x5A11D0000000ULL;

// Samples `picks` of `from`, in that order, as a data set of its own.
Dataset subset(const Dataset& from, const std::vector<int64_t>& picks, std::string name) {
  Dataset out;
  out.name = std::move(name);
  out.sample_shape = from.sample_shape;
  out.classes = from.classes;
  out.class_names = from.class_names;
  out.labels.reserve(picks.size());
  for (int64_t p : picks) out.labels.push_back(from.labels[static_cast<size_t>(p)]);
  if (from.on_the_fly()) {  // a reader of the picked samples
    out.read = [read = from.read, picks](int64_t i, uint8_t* o) {
      read(picks[static_cast<size_t>(i)], o);
    };
    return out;
  }
  const size_t bytes = static_cast<size_t>(from.sample_shape.numel());
  out.images.resize(picks.size() * bytes);
  for (size_t k = 0; k < picks.size(); ++k)
    std::copy_n(from.images.begin() + static_cast<std::ptrdiff_t>(picks[k] * bytes), bytes,
                out.images.begin() + static_cast<std::ptrdiff_t>(k * bytes));
  return out;
}

}  // namespace

Dataset hold_out(Dataset& train, double share, uint64_t seed) {
  if (share <= 0) return subset(train, {}, "no validation share");  // train's shape, no samples
  const int64_t n = train.size();
  int64_t k = static_cast<int64_t>(std::llround(share * static_cast<double>(n)));
  if (k < 1) k = 1;  // a share, however small, holds out a sample
  if (k >= n)
    throw DataError(fmt::format("data.val_split {} holds out {} of the {} train samples, leaving "
                                "none to train on",
                                share, k, n),
                    "lower data.val_split, or use a larger train split");
  // A partial Fisher-Yates from Philox: the first k places of a seeded permutation.
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  for (int64_t i = 0; i < k; ++i) {
    const uint64_t block = static_cast<uint64_t>(i);
    const uint32_t r =
        philox4x32_10(static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                      static_cast<uint32_t>(kValStream), static_cast<uint32_t>(kValStream >> 32),
                      seed)
            .v[0];
    const int64_t j =
        i + static_cast<int64_t>((static_cast<uint64_t>(r) * static_cast<uint64_t>(n - i)) >> 32);
    std::swap(order[i], order[j]);
  }
  std::vector<int64_t> val(order.begin(), order.begin() + k), rest(order.begin() + k, order.end());
  std::sort(val.begin(), val.end());
  std::sort(rest.begin(), rest.end());
  Dataset out = subset(train, val, "validation share of " + train.name);
  Dataset kept = subset(train, rest, train.name);
  kept.skipped = train.skipped;
  kept.skipped_examples = std::move(train.skipped_examples);
  train = std::move(kept);
  return out;
}

ChannelStats channel_stats(const Dataset& data) {
  const Shape& s = data.sample_shape;
  const int64_t c = s.rank() == 3 ? s[0] : 1;
  const int64_t plane = s.numel() / c;
  // Exact integer sums: a double sum of squares would drift over 10^8 pixels.
  std::vector<uint64_t> sum(static_cast<size_t>(c)), sum_sq(static_cast<size_t>(c));
  // On the fly the samples are decoded a block at a time.
  constexpr int64_t kBlock = 256;
  std::vector<int64_t> which;
  std::vector<uint8_t> block;
  for (int64_t first = 0; first < data.size(); first += kBlock) {
    const int64_t n = std::min(kBlock, data.size() - first);
    const uint8_t* p;
    if (data.on_the_fly()) {
      which.resize(static_cast<size_t>(n));
      for (int64_t k = 0; k < n; ++k) which[k] = first + k;
      block.resize(static_cast<size_t>(n * s.numel()));
      read_samples(data, which.data(), n, block.data());
      p = block.data();
    } else {
      p = data.images.data() + first * s.numel();
    }
    for (int64_t i = 0; i < n; ++i)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t k = 0; k < plane; ++k, ++p) {
          sum[ch] += *p;
          sum_sq[ch] += static_cast<uint64_t>(*p) * *p;
        }
  }
  ChannelStats out;
  const double n = static_cast<double>(data.size() * plane);
  for (int64_t ch = 0; ch < c; ++ch) {
    const double mean = n > 0 ? static_cast<double>(sum[ch]) / n : 0.0;
    const double var = n > 0 ? static_cast<double>(sum_sq[ch]) / n - mean * mean : 0.0;
    const double std = var > 0 ? std::sqrt(var) : 0.0;
    out.mean.push_back(static_cast<float>(mean / 255.0));
    out.std.push_back(std > 0 ? static_cast<float>(std / 255.0) : 1.0f);
  }
  return out;
}

std::string format_values(const std::vector<float>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += fmt::format("{}{:.4f}", i ? ", " : "", v[i]);
  return out + "]";
}

std::string apply_normalize_auto(DataConfig& config, const Dataset& train) {
  if (!config.normalize_auto) return "";
  ChannelStats stats = channel_stats(train);
  config.mean = stats.mean;
  config.std = stats.std;
  return fmt::format(
      "Normalise: mean {} std {}, computed over {} train images (data.normalize: auto)\n",
      format_values(config.mean), format_values(config.std), train.size());
}

}  // namespace tandem
