// Synthetic data set: one random prototype pattern per class, samples = scaled prototype + noise.
#pragma once

#include "datasets/dataset.h"

namespace tandem {

// `size` uint8 samples of `shape` in `classes` balanced classes (sample i has label i % classes),
// drawn from Philox with `seed`: the same seed gives the same bytes on every platform. The train
// split (train = true) and the test split share the prototypes and differ in their noise.
// Each class's prototype is a smooth random field (a coarse grid of normals, bilinearly upsampled,
// per channel); a sample is 128 + a * amp * prototype + noise with a in [0.5, 1.5), clamped to
// 0..255. The amplitude is scaled with the sample size so that the class signal is as strong for
// 3x32x32 as for 1x28x28: an MLP or a CNN learns it within an epoch or two, to well above chance
// but not at once.
Dataset make_synthetic(const Shape& shape, int classes, int64_t size, uint64_t seed, bool train);

}  // namespace tandem
