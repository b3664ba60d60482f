// A data folder that is not there, told with every place it was looked for.
#pragma once

#include <string>

#include "engine/config.h"

namespace tandem {

// Throws DataError when `folder` (a split's folder resolved from data.path or --data) does not
// exist: where it was given, each place looked in (beside the config, from the working folder), a
// near name, the files the format's loader takes and the bundled sample. Returns otherwise.
void check_data_folder(const DataConfig& config, const std::string& folder);

// ", which looks channels-last (Keras' [H, W, C]); tandem takes [C, H, W]" where the model's
// `input` is the (C,H,W) `samples` in Keras' order ([28, 28, 1] for [1, 28, 28]); "" otherwise.
std::string channels_last_note(const Shape& samples, const Shape& input);

}  // namespace tandem
