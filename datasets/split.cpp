// Normalisation statistics of a split, and the validation share held out of the train split.
#include "datasets/split.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "engine/error.h"
#include "engine/progress.h"
#include "engine/rng.h"

namespace tandem {

namespace {

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

namespace {

// A number drawn from (seed, stream, i): uniform in [0, 2^32).
uint32_t draw(uint64_t seed, uint64_t stream, uint64_t i) {
  return philox4x32_10(static_cast<uint32_t>(i), static_cast<uint32_t>(i >> 32),
                       static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32), seed)
      .v[0];
}

// The first k places of a seeded permutation of `items` (a partial Fisher-Yates), in place.
void shuffle_front(std::vector<int64_t>& items, int64_t k, uint64_t seed, uint64_t stream) {
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < k && i < n; ++i) {
    const uint32_t r = draw(seed, stream, static_cast<uint64_t>(i));
    const int64_t j =
        i + static_cast<int64_t>((static_cast<uint64_t>(r) * static_cast<uint64_t>(n - i)) >> 32);
    std::swap(items[static_cast<size_t>(i)], items[static_cast<size_t>(j)]);
  }
}

}  // namespace

Dataset hold_out(Dataset& train, double share, uint64_t seed, uint64_t stream,
                 const std::string& what) {
  if (share <= 0) return subset(train, {}, "no " + what + " share");  // train's shape, no samples
  const int64_t n = train.size();
  int64_t k = static_cast<int64_t>(std::llround(share * static_cast<double>(n)));
  if (k < 1) k = 1;  // a share, however small, holds out a sample
  if (k >= n)
    throw DataError(
        fmt::format("data.{}_split {} holds out {} of the {} train samples, leaving "
                    "none to train on",
                    what == "validation" ? "val" : what, share, format_count(k), format_count(n)),
        "lower data." + std::string(what == "validation" ? "val" : what) +
            "_split, or use a larger data set");
  // Stratified by class: each class gives its share, rounded down, and the samples still to
  // place go to the classes with the largest remainders (ties in a seeded order), so that the
  // split holds every class in proportion and exactly k samples.
  std::map<int32_t, std::vector<int64_t>> by_class;
  for (int64_t i = 0; i < n; ++i) by_class[train.labels[static_cast<size_t>(i)]].push_back(i);
  std::vector<int64_t> classes;                   // indices into `quota`, for the seeded tie order
  std::vector<std::pair<int64_t, double>> quota;  // per class: samples taken, remainder
  int64_t placed = 0;
  for (const auto& [label, members] : by_class) {
    const double q =
        static_cast<double>(members.size()) * static_cast<double>(k) / static_cast<double>(n);
    const int64_t whole = static_cast<int64_t>(std::floor(q));
    quota.emplace_back(whole, q - static_cast<double>(whole));
    classes.push_back(static_cast<int64_t>(classes.size()));
    placed += whole;
  }
  shuffle_front(classes, static_cast<int64_t>(classes.size()), seed, stream + 1);
  std::stable_sort(classes.begin(), classes.end(), [&](int64_t a, int64_t b) {
    return quota[static_cast<size_t>(a)].second > quota[static_cast<size_t>(b)].second;
  });
  for (size_t c = 0; placed < k && c < classes.size(); ++c, ++placed)
    ++quota[static_cast<size_t>(classes[c])].first;
  std::vector<int64_t> val, rest;
  size_t c = 0;
  for (auto& [label, members] : by_class) {
    const int64_t take = quota[c++].first;
    // Each class draws from a stream of its own: the classes do not shift each other's draws.
    shuffle_front(members, take, seed, stream + 2 + static_cast<uint64_t>(label));
    val.insert(val.end(), members.begin(), members.begin() + take);
    rest.insert(rest.end(), members.begin() + take, members.end());
  }
  std::sort(val.begin(), val.end());
  std::sort(rest.begin(), rest.end());
  Dataset out = subset(train, val, what + " share of " + train.name);
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
      format_values(config.mean), format_values(config.std), format_count(train.size()));
}

}  // namespace tandem
