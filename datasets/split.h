// Preparing the loaded splits for training: normalisation statistics and a validation share.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "datasets/dataset.h"

namespace tandem {

// The Philox streams of the held-out draws: apart from the per-epoch shuffles (stream = epoch)
// and from each other (each class draws from a stream after its split's).
inline constexpr uint64_t kValStream = 0x5A11D0000000ULL;
inline constexpr uint64_t kTestStream = 0x7E57D0000000ULL;

// data.val_split (and data.test_split, with kTestStream and what "test"): moves round(share *
// size) samples (at least one when share > 0), drawn from the seed and stratified by class (each
// class in proportion, the remainders placed in a seeded order), out of `train` into the returned
// set; both keep their samples' order. Throws DataError when no training sample would be left;
// share 0 leaves `train` as it is.
Dataset hold_out(Dataset& train, double share, uint64_t seed, uint64_t stream = kValStream,
                 const std::string& what = "validation");

// Per-channel mean and (population) standard deviation of pixel/255 over every sample: C of
// (C,H,W) samples, one channel for any other rank. A constant channel gets std 1 (centred only).
struct ChannelStats {
  std::vector<float> mean, std;
};
ChannelStats channel_stats(const Dataset& data);

// data.normalize: auto: sets config.mean and std to the train split's channel_stats and returns
// the start-up line that says so; "" (config unchanged) otherwise.
std::string apply_normalize_auto(DataConfig& config, const Dataset& train);

// "[0.1307]", "[0.4914, 0.4822, 0.4465]": values as the start-up lines print them.
std::string format_values(const std::vector<float>& v);

}  // namespace tandem
